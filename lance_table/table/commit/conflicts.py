"""Conflict resolution: can my transaction be rebased onto transactions committed since I read?

One function per kind of my operation; each looks at every transaction committed since my read
version, in commit order, and either accepts it, rewrites my operation, or raises
:class:`CommitConflictError` saying whether an application-level retry makes sense.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from lance_table.errors import CommitConflictError
from lance_table.format.manifest import DeletionFile, Fragment, Manifest
from lance_table.format.transaction import (
    Append,
    Delete,
    Operation,
    OtherOperation,
    Overwrite,
    ReserveFragments,
    Restore,
    Rewrite,
    Transaction,
)
from lance_table.storage import Storage
from lance_table.table.deletion import read_deletions, union, write_deletions


@dataclass
class Pending:
    """What a commit needs: the operation, what it read, and the files it wrote.

    ``written`` (paths relative to the dataset root) are deleted if the commit fails with a known
    outcome. For deletes, the rows each fragment loses and the deletion file it had are kept so that
    the delete can be re-derived against a newer version.
    """

    operation: Operation
    read_version: int
    # fragment id -> offsets this delete removes (beyond what the fragment had deleted before)
    delete_additions: Mapping[int, np.ndarray] = field(default_factory=dict)
    # fragment id -> the deletion file the fragment had when this delete read it
    delete_bases: Mapping[int, DeletionFile | None] = field(default_factory=dict)
    written: tuple[str, ...] = ()


def _touched(op: Operation) -> set[int]:
    """Existing fragment ids an operation modifies or removes."""
    if isinstance(op, Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, Rewrite):
        return {f.id for g in op.groups for f in g.old_fragments}
    if isinstance(op, OtherOperation):
        return set(op.fragment_ids)
    return set()


def _replaces_data(op: Operation) -> bool:
    return isinstance(op, (Overwrite, Restore))


def _changes_schema(op: Operation) -> bool:
    return isinstance(op, OtherOperation) and op.name in ("merge", "project", "update_config", "clone")


def _conflict(message: str, *, retryable: bool = True) -> CommitConflictError:
    return CommitConflictError(message, retryable=retryable)


def _check_append(mine: Operation, other: Operation, where: str) -> None:
    """An append adds new fragments: only a schema change gets in its way."""
    if _changes_schema(other):
        raise _conflict(f"a concurrent {other.name} changed the schema ({where})")


def _check_fragments(mine: Operation, other: Operation, where: str) -> None:
    """A delete, rewrite (compaction) or other operation on fragments needs them unchanged by
    anything else; only two deletes of the same fragments merge (their deletions are unioned)."""
    if _changes_schema(other):
        raise _conflict(f"a concurrent {other.name} changed the table ({where})")
    overlap = _touched(mine) & _touched(other)
    if overlap and not (isinstance(mine, Delete) and isinstance(other, Delete)):
        raise _conflict(f"{mine.name} and a concurrent {other.name} both changed fragments {sorted(overlap)}")


# One check per kind of my operation; Overwrite, Restore and ReserveFragments apply to whatever
# version is latest and need none.
_CHECKS = {
    Append: _check_append,
    Delete: _check_fragments,
    Rewrite: _check_fragments,
    OtherOperation: _check_fragments,
}


def rebase(pending: Pending, theirs: list[Transaction], latest: Manifest, storage: Storage) -> Pending:
    """Rebase ``pending`` onto the transactions committed after its read version.

    Raises:
        CommitConflictError: the operations cannot be combined.
    """
    mine = pending.operation
    check = _CHECKS.get(type(mine))
    if check is None:
        return pending
    for txn in theirs:
        other = txn.operation
        where = f"version committed by transaction {txn.uuid} ({other.name})"
        if _replaces_data(other):
            raise _conflict(
                f"a concurrent {other.name} replaced the data this {mine.name} was based on ({where})",
                retryable=False,
            )
        if not isinstance(other, (ReserveFragments, Append)):
            check(mine, other, where)
    if isinstance(mine, Delete):
        return _rebase_delete(pending, mine, latest, storage)
    return pending


def _rebase_delete(pending: Pending, mine: Delete, latest: Manifest, storage: Storage) -> Pending:
    """Re-derive my deletions from the latest state of every fragment I touch."""
    current = {f.id: f for f in latest.fragments}
    planned = {f.id: f for f in mine.updated_fragments}
    updated: list[Fragment] = []
    removed: list[int] = []
    written: list[str] = []
    for frag_id, added in pending.delete_additions.items():
        frag = current.get(frag_id)
        if frag is None:
            continue  # a concurrent delete removed the whole fragment already
        if frag.deletion_file == pending.delete_bases.get(frag_id):
            # nobody touched this fragment's deletions: what was planned still holds
            if frag_id in planned:
                updated.append(planned[frag_id])
            else:
                removed.append(frag_id)
            continue
        merged = union(read_deletions(storage, frag), added)
        if merged.size >= frag.physical_rows:
            removed.append(frag_id)
        elif merged.size == frag.num_deleted:
            continue  # nothing new for this fragment
        else:
            df = write_deletions(storage, frag, merged, pending.read_version)
            written.append(df.path(frag.id))
            updated.append(replace(frag, deletion_file=df))
    op = Delete(tuple(updated), tuple(sorted(removed)), mine.predicate)
    return replace(pending, operation=op, written=pending.written + tuple(written))
