"""Table config, table metadata, schema metadata and field metadata changes, each committed as one
``UpdateConfig`` transaction, as pylance commits them (``update_config``, ``delete_config_keys``,
``update_metadata``, ``update_schema_metadata``, ``update_field_metadata``).

Values are strings; a None value removes its key (ignored when the map is replaced whole).

A change made through a stale handle is rebased over what others committed since (see
``commit.conflicts``). When it cannot be rebased but may be re-run (cleanup removed the versions in
between, so their transactions are gone; or a concurrent schema change preempted it), it is planned
again on the latest version, up to :data:`CONFLICT_RETRIES` times. A re-run first checks what the
transactions would have shown: every key, map or field it changes must still hold what the handle
read. A change of the same key by another writer stays a :class:`CommitConflictError`, as pylance
reports it when the history is there to see.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping

from lance_table.errors import CommitConflictError, FieldNotFoundError
from lance_table.format.manifest import Manifest
from lance_table.format.operations import UpdateConfig, UpdateMap
from lance_table.schema import FieldNode, build_tree
from lance_table.table import versions
from lance_table.table.commit import Pending, check_can_commit
from lance_table.table.commit.retry import retry_on_conflict
from lance_table.table.snapshot import Snapshot

Values = Mapping[str, str | None]
# Re-runs of a config change after a retryable conflict, and the time they may take in all.
CONFLICT_RETRIES = 10
RETRY_TIMEOUT = dt.timedelta(seconds=30)


def update_map(values: Values, replace: bool, what: str) -> UpdateMap:
    """The changes ``values`` as an :class:`UpdateMap` (``what`` names the argument in errors).

    Raises:
        TypeError: ``values`` is not a mapping of strings to strings or None.
    """
    if not isinstance(values, Mapping):
        raise TypeError(f"{what} must be a dict of strings to strings (or None), not {type(values).__name__}")
    for key, value in values.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, str)):
            raise TypeError(
                f"{what} must map strings to strings (or None); got {key!r}: {type(value).__name__}"
            )
    return UpdateMap(tuple(values.items()), replace)


def commit_config(
    ds: Snapshot, plan: Callable[[Snapshot], UpdateConfig], message: str | None = None
) -> Snapshot:
    """Commit the change ``plan`` makes of a version, planned on ``ds`` (and again on the latest
    version after a retryable conflict); the version it made.

    Raises:
        UnsupportedFormatError: the version needs writer features lance_table lacks.
        CommitConflictError: a concurrent change of the same keys, schema metadata or fields, or a
            retryable conflict once the retries run out.
    """
    versions.check_writable(ds.manifest, ds.uri)
    check_can_commit(ds.commit_options, ds.storage)

    def attempt(base: Snapshot) -> Snapshot:
        op = plan(base)
        if base is not ds:
            versions.check_writable(base.manifest, base.uri)
            check_unchanged(ds.manifest, base.manifest, op)
        return base.commit(Pending(op, base.version), message=message)

    return retry_on_conflict(ds, attempt, CONFLICT_RETRIES, RETRY_TIMEOUT)


def _changed_keys(update: UpdateMap, before: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """The keys of ``update`` another writer changed between ``before`` and ``now`` in a way that
    conflicts with it (a key both remove does not; a map replaced whole conflicts with any change)."""
    if update.replace:
        return sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
    upserted = [k for k in update.upserted if before.get(k) != now.get(k)]
    removed = [k for k in update.deleted if k in now and before.get(k) != now.get(k)]
    return sorted({*upserted, *removed})


def check_unchanged(read: Manifest, latest: Manifest, op: UpdateConfig) -> None:
    """Before ``op``, planned anew on ``latest``, is committed by a handle that read ``read``: the
    keys, maps and fields it changes must hold what ``read`` held. The transactions in between may
    be gone (cleaned up); what they changed is still visible in the two manifests.

    Raises:
        CommitConflictError: (not retryable) another writer changed what ``op`` changes.
    """
    where = f"between versions {read.version} and {latest.version} of the dataset"
    clashes: list[str] = []
    if op.config_updates is not None:
        keys = _changed_keys(op.config_updates, read.config, latest.config)
        clashes += [f"config key {k!r}" for k in keys]
    if op.table_metadata_updates is not None:
        keys = _changed_keys(op.table_metadata_updates, read.table_metadata, latest.table_metadata)
        clashes += [f"table metadata key {k!r}" for k in keys]
    if op.schema_metadata_updates is not None and dict(read.schema_metadata) != dict(latest.schema_metadata):
        clashes.append("the schema metadata")
    before = {f.id: f for f in read.fields}
    now = {f.id: f for f in latest.fields}
    for field_id in sorted(op.field_metadata_updates):
        old, new = before.get(field_id), now.get(field_id)
        if old is not None and (new is None or dict(old.metadata) != dict(new.metadata)):
            clashes.append(f"the metadata of field {old.name!r} (id {field_id})")
    if clashes:
        raise CommitConflictError(
            f"this update_config is incompatible with a concurrent change of {', '.join(clashes)} ({where})",
            retryable=False,
        )


def update_config(ds: Snapshot, values: Values, replace: bool = False) -> Snapshot:
    """Set (or, with None, remove) config keys; ``replace`` starts from no keys.

    Raises:
        TypeError: as :func:`update_map`; CommitConflictError as :func:`commit_config`.
    """
    changes = update_map(values, replace, "values")
    return commit_config(ds, lambda _: UpdateConfig(config_updates=changes))


def delete_config_keys(ds: Snapshot, keys: Iterable[str]) -> Snapshot:
    """Remove config keys (missing ones are ignored).

    Raises:
        TypeError: ``keys`` is a string or holds something other than strings.
    """
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise TypeError(f"keys must be a list of strings, not {type(keys).__name__}")
    return update_config(ds, dict.fromkeys(list(keys)))


def update_table_metadata(ds: Snapshot, values: Values, replace: bool = False) -> Snapshot:
    """Set (or remove) table metadata keys.

    Raises:
        TypeError: as :func:`update_map`.
    """
    changes = update_map(values, replace, "values")
    return commit_config(ds, lambda _: UpdateConfig(table_metadata_updates=changes))


def update_schema_metadata(ds: Snapshot, values: Values, replace: bool = False) -> Snapshot:
    """Set (or remove) schema metadata keys.

    Raises:
        TypeError: as :func:`update_map`.
    """
    changes = update_map(values, replace, "values")
    return commit_config(ds, lambda _: UpdateConfig(schema_metadata_updates=changes))


def _paths(nodes: Iterable[FieldNode], prefix: str = "") -> Iterator[tuple[str, int]]:
    for node in nodes:
        path = f"{prefix}{node.name}"
        yield path, node.id
        yield from _paths(node.children, f"{path}.")


def update_field_metadata(
    ds: Snapshot, field_updates: Mapping[str, Values], replace: bool = False
) -> Snapshot:
    """Set (or remove) metadata keys of fields named by path (``"a"``, ``"s.x"``).

    Raises:
        TypeError: ``field_updates`` is not a dict of paths to dicts of strings.
        FieldNotFoundError: a path names no field (nothing is committed).
    """
    if not isinstance(field_updates, Mapping):
        raise TypeError(
            f"field_updates must be a dict of field paths to dicts, not {type(field_updates).__name__}"
        )
    updates = dict(field_updates)

    def plan(base: Snapshot) -> UpdateConfig:
        # paths are resolved on the version the change is made to (again on a re-run)
        ids = dict(_paths(build_tree(base.manifest.fields)))
        changes: dict[int, UpdateMap] = {}
        for path, values in updates.items():
            if not isinstance(path, str):
                raise TypeError(f"field paths must be strings, not {type(path).__name__}")
            if path not in ids:
                raise FieldNotFoundError(path, list(ids))
            changes[ids[path]] = update_map(values, replace, f"the metadata of field {path!r}")
        return UpdateConfig(field_metadata_updates=changes)

    plan(ds)  # bad paths and values are refused before anything is committed
    return commit_config(ds, plan)


def string_map(values: Mapping[str, bytes] | Mapping[str, str]) -> dict[str, str]:
    """A metadata map with its values as text."""
    return {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v for k, v in values.items()}


__all__ = [
    "CONFLICT_RETRIES",
    "RETRY_TIMEOUT",
    "check_unchanged",
    "commit_config",
    "delete_config_keys",
    "string_map",
    "update_config",
    "update_field_metadata",
    "update_map",
    "update_schema_metadata",
    "update_table_metadata",
]
