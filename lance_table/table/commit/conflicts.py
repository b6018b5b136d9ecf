"""Conflict resolution: can my transaction be rebased onto transactions committed since I read?

One function per kind of my operation; each looks at every transaction committed since my read
version, in commit order, and either accepts it, rewrites my operation, or raises
:class:`CommitConflictError` saying whether an application-level retry makes sense.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from lance_table.errors import CommitConflictError
from lance_table.format.manifest import DeletionFile, Fragment, Manifest
from lance_table.format.operations import (
    DataReplacement,
    Merge,
    Project,
    Update,
    UpdateConfig,
    touched_fragment_ids,
)
from lance_table.format.transaction import (
    Append,
    Delete,
    Operation,
    OtherOperation,
    Overwrite,
    Rewrite,
    Transaction,
)
from lance_table.storage import Storage
from lance_table.table.deletion import read_deletions, union, write_deletions


@dataclass
class Pending:
    """What a commit needs: the operation, what it read, and the files it wrote.

    ``written`` (paths relative to the dataset root) and ``elsewhere`` (files in other base paths:
    the base id and the path relative to that base) are deleted if the commit fails with a known
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
    elsewhere: tuple[tuple[int, str], ...] = ()


def _touched(op: Operation) -> set[int]:
    """Existing fragment ids an operation modifies or removes."""
    if isinstance(op, Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, Rewrite):
        return {f.id for g in op.groups for f in g.old_fragments}
    if isinstance(op, OtherOperation):
        return set(op.fragment_ids)
    return touched_fragment_ids(op)


def _conflict(message: str, *, retryable: bool = True) -> CommitConflictError:
    return CommitConflictError(message, retryable=retryable)


# Outcomes of one check: None (compatible), or the conflict, retryable or not.
RETRY = "retry"
INCOMPATIBLE = "incompatible"
Outcome = str | None

# Kinds (transaction protobuf names) that replace the table's data or state wholesale.
_REPLACES = {"overwrite", "restore"}


def _kind(op: Operation) -> str:
    return op.name


def _changes_nullability(op: Operation) -> bool:
    """A Merge or Project that does not promise to keep data staged against the old schema valid
    (pylance's ``preserves_nullability``): concurrent writes of new rows must retry."""
    return isinstance(op, (Merge, Project)) and not op.preserves_nullability


def _overlap(mine: Operation, other: Operation) -> bool:
    return bool(_touched(mine) & _touched(other))


def _check_append(mine: Operation, other: Operation, pending: Pending) -> Outcome:
    if _kind(other) in _REPLACES | {"update_mem_wal_state"}:
        return INCOMPATIBLE
    return RETRY if _changes_nullability(other) else None


def _check_delete_update(mine: Operation, other: Operation, pending: Pending) -> Outcome:
    """A Delete or Update needs the fragments it changes unchanged by others; a delete made here
    (which knows the rows it removes) is rebased over other deletes and updates of its fragments."""
    kind = _kind(other)
    if kind == "update_mem_wal_state":
        return None if isinstance(mine, Update) else INCOMPATIBLE
    if kind in _REPLACES:
        return INCOMPATIBLE
    if kind == "merge":
        return RETRY
    if isinstance(mine, Update) and isinstance(other, Project) and _changes_nullability(other):
        return RETRY
    if kind in ("rewrite", "data_replacement"):
        return RETRY if _overlap(mine, other) else None
    rebasable = isinstance(mine, Delete) and bool(pending.delete_additions) and isinstance(other, Delete)
    if isinstance(other, (Delete, Update)) and _overlap(mine, other) and not rebasable:
        # the rows it removes are not known (a commit of a LanceOperation), or the other rewrote
        # rows of its fragments: it cannot be rebased
        return RETRY
    return None


def _check_rewrite(mine: Operation, other: Operation, pending: Pending) -> Outcome:
    kind = _kind(other)
    if kind in _REPLACES:
        return INCOMPATIBLE
    if kind == "merge":
        return RETRY
    if kind in ("delete", "update", "rewrite", "data_replacement"):
        return RETRY if _overlap(mine, other) else None
    return None


def _touches_schema(op: Operation) -> bool:
    """An UpdateConfig that changes schema or field metadata (pylance 14 orders these against
    schema changes and restores; plain config changes commute with them)."""
    return isinstance(op, UpdateConfig) and (
        op.schema_metadata_updates is not None or bool(op.field_metadata_updates)
    )


def _check_merge(mine: Operation, other: Operation, pending: Pending) -> Outcome:
    kind = _kind(other)
    if kind in _REPLACES | {"project", "update_mem_wal_state"}:
        return INCOMPATIBLE
    if kind in ("update", "append", "delete", "rewrite", "merge", "data_replacement"):
        return RETRY
    if _touches_schema(other):
        return RETRY  # the new schema would carry the old metadata
    return None


def _check_project(mine: Operation, other: Operation, pending: Pending) -> Outcome:
    kind = _kind(other)
    if kind in _REPLACES | {"update_mem_wal_state"}:
        return INCOMPATIBLE
    if kind in ("merge", "project"):
        return RETRY
    if kind in ("append", "update", "data_replacement") and _changes_nullability(mine):
        return RETRY
    return None


def _config_keys(op: Operation) -> tuple[set[str], set[str]]:
    """The config keys an operation sets and deletes."""
    if isinstance(op, UpdateConfig) and op.config_updates is not None:
        return op.config_updates.upserted, op.config_updates.deleted
    if isinstance(op, Overwrite):
        return set(op.config_upsert_values), set()
    return set(), set()


def _upsert_key_conflict(mine: Operation, other: Operation) -> bool:
    (mine_set, mine_del), (other_set, other_del) = _config_keys(mine), _config_keys(other)
    return bool(mine_set & (other_set | other_del) or other_set & (mine_set | mine_del))


def _table_metadata_conflict(mine: UpdateConfig, other: UpdateConfig) -> bool:
    """Two changes of the table metadata conflict (as in pylance 14) when they name a key in
    common, whether they set or remove it, or when either replaces the map whole."""
    a, b = mine.table_metadata_updates, other.table_metadata_updates
    if a is None or b is None:
        return False
    return a.replace or b.replace or bool({k for k, _ in a.updates} & {k for k, _ in b.updates})


def _check_update_config(mine: Operation, other: Operation, pending: Pending) -> Outcome:
    assert isinstance(mine, UpdateConfig)
    if _touches_schema(mine):
        if _kind(other) == "restore":
            return INCOMPATIBLE
        if _kind(other) == "merge":
            return RETRY
    if isinstance(other, Overwrite):
        touches_schema = mine.schema_metadata_updates is not None or bool(mine.field_metadata_updates)
        return INCOMPATIBLE if touches_schema or _upsert_key_conflict(mine, other) else None
    if isinstance(other, UpdateConfig):
        same = (
            mine.schema_metadata_updates is not None and other.schema_metadata_updates is not None
        ) or bool(set(mine.field_metadata_updates) & set(other.field_metadata_updates))
        same = same or _table_metadata_conflict(mine, other)
        return INCOMPATIBLE if same or _upsert_key_conflict(mine, other) else None
    return None


def _check_data_replacement(mine: Operation, other: Operation, pending: Pending) -> Outcome:
    assert isinstance(mine, DataReplacement)
    kind = _kind(other)
    if kind in _REPLACES | {"update_mem_wal_state"}:
        return INCOMPATIBLE
    if kind == "rewrite":
        return RETRY if _overlap(mine, other) else None
    if kind == "create_index":
        return RETRY  # the index's fields are not known here: assume it covers a replaced field
    if kind == "merge":
        return RETRY
    if isinstance(other, Project):
        if not other.preserves_nullability:
            return RETRY
        kept = {f.id for f in other.schema}
        replaced = {i for _, new_file in mine.replacements for i in new_file.fields}
        return INCOMPATIBLE if replaced - kept else None  # a replaced column was dropped
    if isinstance(other, Update):
        # its rows of a replaced fragment moved (a delete only adds deletions: no conflict)
        return RETRY if _overlap(mine, other) else None
    if isinstance(other, DataReplacement):
        for frag_id, new_file in mine.replacements:
            for other_id, other_file in other.replacements:
                if frag_id == other_id and set(new_file.fields) & set(other_file.fields):
                    return RETRY
    return None


# One check per kind of my operation (pylance's conflict resolver); Overwrite, Restore and
# ReserveFragments apply to whatever version is latest and need none.
_CHECKS: dict[type, Callable[[Operation, Operation, Pending], Outcome]] = {
    Append: _check_append,
    Delete: _check_delete_update,
    Update: _check_delete_update,
    Rewrite: _check_rewrite,
    Merge: _check_merge,
    Project: _check_project,
    UpdateConfig: _check_update_config,
    DataReplacement: _check_data_replacement,
}


def rebase(pending: Pending, theirs: list[Transaction], latest: Manifest, storage: Storage) -> Pending:
    """Rebase ``pending`` onto the transactions committed after its read version.

    Raises:
        CommitConflictError: the operations cannot be combined (retryable when a retry of the
            whole operation on the latest version can succeed).
    """
    mine = pending.operation
    check = _CHECKS.get(type(mine))
    if check is None:
        return pending
    for txn in theirs:
        other = txn.operation
        outcome = check(mine, other, pending)
        if outcome is not None:
            where = f"version committed by transaction {txn.uuid} ({other.name})"
            if outcome == INCOMPATIBLE:
                raise _conflict(
                    f"this {mine.name} is incompatible with a concurrent {other.name} ({where})",
                    retryable=False,
                )
            raise _conflict(
                f"this {mine.name} was preempted by a concurrent {other.name} ({where}); retry it"
            )
    if isinstance(mine, Delete) and pending.delete_additions:
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
