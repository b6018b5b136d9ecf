"""The transaction operations that change a dataset's schema, metadata or data files in place:
``Merge``, ``Update``, ``Project``, ``UpdateConfig`` and ``DataReplacement``, with their protobuf
form (the field numbers of ``lance.table.Transaction`` that pylance writes and reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_table.format.manifest import DataFile, Fragment
from lance_table.schema import LanceField, fields_from_pb, fields_to_pb

# Update.update_mode, as the protobuf enum numbers them.
REWRITE_ROWS = 0
REWRITE_COLUMNS = 1


@dataclass(frozen=True)
class Merge:
    """Replace every fragment and the schema (new columns added to existing fragments)."""

    fragments: tuple[Fragment, ...]
    schema: tuple[LanceField, ...]
    schema_metadata: Mapping[str, bytes] = field(default_factory=dict)
    preserves_nullability: bool = False
    name = "merge"


@dataclass(frozen=True)
class Update:
    """Rows rewritten: fragments removed or given new deletion files (or new data files), and new
    fragments holding the rewritten rows."""

    removed_fragment_ids: tuple[int, ...]
    updated_fragments: tuple[Fragment, ...]
    new_fragments: tuple[Fragment, ...]
    fields_modified: tuple[int, ...] = ()
    fields_for_preserving_frag_bitmap: tuple[int, ...] = ()
    update_mode: int = REWRITE_ROWS
    # A serialized ``MemWalIndexDetails.MemWal`` pylance may carry; kept as it is.
    mem_wal_to_merge: bytes = b""
    name = "update"


@dataclass(frozen=True)
class Project:
    """A new schema over the same fragments (drop, rename or reorder columns)."""

    schema: tuple[LanceField, ...]
    preserves_nullability: bool = False
    # Not stored in the transaction: the manifest's schema metadata after the projection.
    schema_metadata: Mapping[str, bytes] | None = field(default=None, compare=False)
    name = "project"


@dataclass(frozen=True)
class UpdateMap:
    """Changes to a string map: ``None`` values delete keys; ``replace`` starts from an empty map."""

    updates: tuple[tuple[str, str | None], ...]
    replace: bool = False

    def apply(self, target: Mapping[str, Any], encode: bool = False) -> dict[str, Any]:
        """``target`` with the changes made (values as bytes when ``encode``)."""
        out: dict[str, Any] = {} if self.replace else dict(target)
        for key, value in self.updates:
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value.encode() if encode else value
        return out

    @property
    def upserted(self) -> set[str]:
        return {k for k, v in self.updates if v is not None}

    @property
    def deleted(self) -> set[str]:
        return {k for k, v in self.updates if v is None}


@dataclass(frozen=True)
class UpdateConfig:
    """Changes to the table config, table metadata, schema metadata and fields' metadata."""

    config_updates: UpdateMap | None = None
    table_metadata_updates: UpdateMap | None = None
    schema_metadata_updates: UpdateMap | None = None
    field_metadata_updates: Mapping[int, UpdateMap] = field(default_factory=dict)
    name = "update_config"


@dataclass(frozen=True)
class DataReplacement:
    """Data files of fragments replaced by new files holding the same fields (or first files of
    fields the fragments had none for)."""

    replacements: tuple[tuple[int, DataFile], ...]
    name = "data_replacement"


def _frags(pbs: Any) -> tuple[Fragment, ...]:
    return tuple(Fragment.from_pb(p) for p in pbs)


def _put_frags(frags: tuple[Fragment, ...], target: Any) -> None:
    for f in frags:
        f.to_pb(target.add())


def _map_to_pb(m: UpdateMap, pb: Any) -> None:
    pb.SetInParent()
    for key, value in m.updates:
        entry = pb.update_entries.add()
        entry.key = key
        if value is not None:
            entry.value = value
    pb.replace = m.replace


def _map_from_pb(pb: Any) -> UpdateMap:
    return UpdateMap(
        tuple((e.key, e.value if e.HasField("value") else None) for e in pb.update_entries), pb.replace
    )


def to_pb(op: Any, pb: Any) -> bool:
    """Write ``op`` into the transaction protobuf ``pb``; False if it is not one of these."""
    if isinstance(op, Merge):
        pb.merge.SetInParent()
        _put_frags(op.fragments, pb.merge.fragments)
        fields_to_pb(op.schema, pb.merge.schema)
        for k, v in op.schema_metadata.items():
            pb.merge.schema_metadata[k] = v
        pb.merge.preserves_nullability = op.preserves_nullability
    elif isinstance(op, Update):
        u = pb.update
        u.SetInParent()
        u.removed_fragment_ids.extend(op.removed_fragment_ids)
        _put_frags(op.updated_fragments, u.updated_fragments)
        _put_frags(op.new_fragments, u.new_fragments)
        u.fields_modified.extend(op.fields_modified)
        u.fields_for_preserving_frag_bitmap.extend(op.fields_for_preserving_frag_bitmap)
        u.update_mode = op.update_mode
        if op.mem_wal_to_merge:
            u.mem_wal_to_merge.MergeFromString(op.mem_wal_to_merge)
    elif isinstance(op, Project):
        pb.project.SetInParent()
        fields_to_pb(op.schema, pb.project.schema)
        pb.project.preserves_nullability = op.preserves_nullability
    elif isinstance(op, UpdateConfig):
        c = pb.update_config
        c.SetInParent()
        for name in ("config_updates", "table_metadata_updates", "schema_metadata_updates"):
            m = getattr(op, name)
            if m is not None:
                _map_to_pb(m, getattr(c, name))
        for field_id, m in op.field_metadata_updates.items():
            _map_to_pb(m, c.field_metadata_updates[field_id])
    elif isinstance(op, DataReplacement):
        pb.data_replacement.SetInParent()
        for frag_id, new_file in op.replacements:
            group = pb.data_replacement.replacements.add()
            group.fragment_id = frag_id
            new_file.to_pb(group.new_file)
    else:
        return False
    return True


def from_pb(pb: Any, kind: str | None) -> Any:
    """The operation of kind ``kind`` in the transaction protobuf ``pb``, or None if it is not one
    of these."""
    if kind == "merge":
        m = pb.merge
        return Merge(
            _frags(m.fragments),
            tuple(fields_from_pb(m.schema)),
            dict(m.schema_metadata),
            m.preserves_nullability,
        )
    if kind == "update":
        u = pb.update
        return Update(
            tuple(u.removed_fragment_ids),
            _frags(u.updated_fragments),
            _frags(u.new_fragments),
            tuple(u.fields_modified),
            tuple(u.fields_for_preserving_frag_bitmap),
            u.update_mode,
            u.mem_wal_to_merge.SerializeToString() if u.HasField("mem_wal_to_merge") else b"",
        )
    if kind == "project":
        return Project(tuple(fields_from_pb(pb.project.schema)), pb.project.preserves_nullability)
    if kind == "update_config":
        return _update_config_from_pb(pb.update_config)
    if kind == "data_replacement":
        return DataReplacement(
            tuple((g.fragment_id, DataFile.from_pb(g.new_file)) for g in pb.data_replacement.replacements)
        )
    return None


def _update_config_from_pb(c: Any) -> UpdateConfig:
    """New-style fields as they are; the old style (upsert_values, delete_keys, schema_metadata,
    field_metadata) translated as pylance translates it."""
    if c.upsert_values or c.delete_keys or c.schema_metadata or c.field_metadata:
        config = None
        if c.upsert_values or c.delete_keys:
            config = UpdateMap(
                tuple((k, v) for k, v in c.upsert_values.items()) + tuple((k, None) for k in c.delete_keys)
            )
        schema = UpdateMap(tuple(c.schema_metadata.items()), replace=True) if c.schema_metadata else None
        fields = {
            fid: UpdateMap(tuple(u.metadata.items()), replace=True) for fid, u in c.field_metadata.items()
        }
        return UpdateConfig(config, None, schema, fields)

    def opt(name: str) -> UpdateMap | None:
        return _map_from_pb(getattr(c, name)) if c.HasField(name) else None

    return UpdateConfig(
        opt("config_updates"),
        opt("table_metadata_updates"),
        opt("schema_metadata_updates"),
        {fid: _map_from_pb(m) for fid, m in c.field_metadata_updates.items()},
    )


def touched_fragment_ids(op: Any) -> set[int]:
    """Existing fragment ids one of these operations modifies or removes."""
    if isinstance(op, Update):
        return {f.id for f in op.updated_fragments} | set(op.removed_fragment_ids)
    if isinstance(op, Merge):
        return {f.id for f in op.fragments}
    if isinstance(op, DataReplacement):
        return {frag_id for frag_id, _ in op.replacements}
    return set()
