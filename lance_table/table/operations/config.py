"""Table config, table metadata, schema metadata and field metadata changes, each committed as one
``UpdateConfig`` transaction, as pylance commits them (``update_config``, ``delete_config_keys``,
``update_metadata``, ``update_schema_metadata``, ``update_field_metadata``).

Values are strings; a None value removes its key (ignored when the map is replaced whole).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from lance_table.errors import FieldNotFoundError
from lance_table.format.operations import UpdateConfig, UpdateMap
from lance_table.schema import FieldNode, build_tree
from lance_table.table import versions
from lance_table.table.commit import Pending, check_can_commit
from lance_table.table.snapshot import Snapshot

Values = Mapping[str, str | None]


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


def commit_config(ds: Snapshot, op: UpdateConfig, message: str | None = None) -> Snapshot:
    """Commit ``op`` on top of ``ds``; the version it made.

    Raises:
        UnsupportedFormatError: the version needs writer features lance_table lacks.
        CommitConflictError: a concurrent change of the same keys, schema metadata or fields.
    """
    versions.check_writable(ds.manifest, ds.uri)
    check_can_commit(ds.commit_options, ds.storage)
    return ds.commit(Pending(op, ds.version), message=message)


def update_config(ds: Snapshot, values: Values, replace: bool = False) -> Snapshot:
    """Set (or, with None, remove) config keys; ``replace`` starts from no keys.

    Raises:
        TypeError: as :func:`update_map`; CommitConflictError as :func:`commit_config`.
    """
    return commit_config(ds, UpdateConfig(config_updates=update_map(values, replace, "values")))


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
    return commit_config(ds, UpdateConfig(table_metadata_updates=update_map(values, replace, "values")))


def update_schema_metadata(ds: Snapshot, values: Values, replace: bool = False) -> Snapshot:
    """Set (or remove) schema metadata keys.

    Raises:
        TypeError: as :func:`update_map`.
    """
    return commit_config(ds, UpdateConfig(schema_metadata_updates=update_map(values, replace, "values")))


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
    ids = dict(_paths(build_tree(ds.manifest.fields)))
    changes: dict[int, UpdateMap] = {}
    for path, values in field_updates.items():
        if not isinstance(path, str):
            raise TypeError(f"field paths must be strings, not {type(path).__name__}")
        if path not in ids:
            raise FieldNotFoundError(path, list(ids))
        changes[ids[path]] = update_map(values, replace, f"the metadata of field {path!r}")
    return commit_config(ds, UpdateConfig(field_metadata_updates=changes))


def string_map(values: Mapping[str, bytes] | Mapping[str, str]) -> dict[str, str]:
    """A metadata map with its values as text."""
    return {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v for k, v in values.items()}


__all__ = [
    "commit_config",
    "delete_config_keys",
    "string_map",
    "update_config",
    "update_field_metadata",
    "update_map",
    "update_schema_metadata",
    "update_table_metadata",
]
