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


@dataclass
class Pending:
    """What a commit needs to rebase itself: the operation and, for deletes, the rows it adds."""

    operation: Operation
    read_version: int
    # fragment id -> offsets this delete removes (beyond what the fragment had deleted before)
    delete_additions: Mapping[int, np.ndarray] = field(default_factory=dict)
    # fragment id -> the deletion file the fragment had when this delete read it
    delete_bases: Mapping[int, DeletionFile | None] = field(default_factory=dict)


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


def rebase(pending: Pending, theirs: list[Transaction], latest: Manifest, storage: Storage) -> Pending:
    """Rebase ``pending`` onto the transactions committed after its read version.

    Raises:
        CommitConflictError: the operations cannot be combined.
    """
    mine = pending.operation
    if isinstance(mine, (Overwrite, Restore, ReserveFragments)):
        return pending  # these apply to whatever is latest
    for txn in theirs:
        other = txn.operation
        where = f"version committed by transaction {txn.uuid} ({other.name})"
        if _replaces_data(other):
            raise CommitConflictError(
                f"a concurrent {other.name} replaced the data this {mine.name} was based on ({where})",
                retryable=False,
            )
        if isinstance(other, (ReserveFragments, Append)):
            continue
        if _changes_schema(other) and not isinstance(mine, Append):
            raise CommitConflictError(
                f"a concurrent {other.name} changed the table ({where})", retryable=True
            )
        if isinstance(mine, Append):
            if _changes_schema(other):
                raise CommitConflictError(
                    f"a concurrent {other.name} changed the schema ({where})", retryable=True
                )
            continue
        overlap = _touched(mine) & _touched(other)
        if not overlap:
            continue
        if isinstance(mine, Delete) and isinstance(other, Delete):
            continue  # merged below against the latest state of each fragment
        raise CommitConflictError(
            f"{mine.name} and a concurrent {other.name} both changed fragments {sorted(overlap)}",
            retryable=True,
        )
    if isinstance(mine, Delete):
        return _rebase_delete(pending, mine, latest, storage)
    return pending


def _rebase_delete(pending: Pending, mine: Delete, latest: Manifest, storage: Storage) -> Pending:
    """Re-derive my deletions from the latest state of every fragment I touch."""
    from lance_table.table.deletion import read_deletions, union, write_deletions

    current = {f.id: f for f in latest.fragments}
    planned = {f.id: f for f in mine.updated_fragments}
    updated: list[Fragment] = []
    removed: list[int] = []
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
            updated.append(replace(frag, deletion_file=df))
    op = Delete(tuple(updated), tuple(sorted(removed)), mine.predicate)
    return Pending(op, pending.read_version, pending.delete_additions, pending.delete_bases)
