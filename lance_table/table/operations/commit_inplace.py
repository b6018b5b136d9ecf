"""Planning hand-built ``Merge``, ``Update``, ``Project``, ``UpdateConfig`` and ``DataReplacement``
operations (pylance's ``LanceOperation``) against the version they read.

Each is checked before anything is written: fragments must be this dataset's, new data files must
exist with the rows and field types their metadata claims, and schemas must keep the field ids and
types of the data they describe. A refused operation changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lance_table.errors import SchemaError
from lance_table.format import manifest as fmt
from lance_table.format.operations import (
    REWRITE_COLUMNS,
    REWRITE_ROWS,
    DataReplacement,
    Merge,
    Project,
    Update,
    UpdateConfig,
    UpdateMap,
)
from lance_table.schema import LanceField, build_tree, fields_from_arrow
from lance_table.table.commit import Pending
from lance_table.table.deletion import read_deletions
from lance_table.table.lance_operation import LanceOperation
from lance_table.table.lance_schema import LanceSchema, as_lance_schema
from lance_table.table.operations.check_fragments import check_fragments
from lance_table.table.operations.schema_add import next_field_id
from lance_table.table.operations.write import writable_data_format
from lance_table.table.snapshot import Snapshot

_UPDATE_MODES = {"": REWRITE_ROWS, "rewrite_rows": REWRITE_ROWS, "rewrite_columns": REWRITE_COLUMNS}


def plan_inplace(base: Snapshot, op: LanceOperation.BaseOperation) -> Pending | None:
    """The pending commit of one of these operations, or None for another kind.

    Raises:
        TypeError: a schema or value of the wrong kind.
        ValueError: fragments that are not in ``base`` or whose data files differ from it there.
        SchemaError: field ids or types that disagree with the dataset or the data files.
        DataFileNotFoundError, CorruptFileError, UnsupportedFormatError: a new data file is
            missing, damaged or of another format (see ``check_fragments``).
    """
    if isinstance(op, LanceOperation.Merge):
        return Pending(_merge(base, op), base.version)
    if isinstance(op, LanceOperation.Update):
        return Pending(_update(base, op), base.version)
    if isinstance(op, LanceOperation.Project):
        return Pending(_project(base, op), base.version)
    if isinstance(op, LanceOperation.UpdateConfig):
        return Pending(_update_config(base, op), base.version)
    if isinstance(op, LanceOperation.DataReplacement):
        return Pending(_data_replacement(base, op), base.version)
    return None


def _check_new_files(base: Snapshot, fields: Sequence[LanceField], frags: Sequence[fmt.Fragment]) -> None:
    check_fragments(base.storage, fields, writable_data_format(base.manifest, base.uri), frags, base.bases)


def _known(base: Snapshot, ids: Sequence[int]) -> dict[int, fmt.Fragment]:
    """The fragments of ``base`` with these ids.

    Raises:
        ValueError: an id is not a fragment of ``base``.
    """
    current = {f.id: f for f in base.manifest.fragments}
    missing = sorted(set(ids) - set(current))
    if missing:
        raise ValueError(f"fragments {missing} are not in version {base.version} of {base.uri}")
    return {i: current[i] for i in ids}


def _check_kept_types(base: Snapshot, fields: Sequence[LanceField], what: str) -> None:
    """Raises: SchemaError: a field id of the dataset is given another type."""
    old = {f.id: f for f in base.manifest.fields}
    for f in fields:
        if f.id in old and old[f.id].logical_type != f.logical_type:
            raise SchemaError(
                f"{what}: field id {f.id} ({f.name!r}) is {f.logical_type}, but the dataset stores it as "
                f"{old[f.id].logical_type} ({old[f.id].name!r}); field ids must name the same data"
            )


def _schema_fields(base: Snapshot, schema: Any, what: str) -> tuple[tuple[LanceField, ...], dict[str, bytes]]:
    """The fields and metadata of a Merge's schema. A pyarrow schema's fields keep the ids of the
    dataset's fields of the same name; new ones get the next unused ids.

    Raises:
        TypeError: not a schema.
        SchemaError: a type has no Lance equivalent, or differs from the dataset's column's.
    """
    lance = as_lance_schema(schema)
    if lance is not None:
        return lance.lance_fields, lance.metadata
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"{what} schema must be a LanceSchema or pyarrow.Schema, got {type(schema)}")
    by_name = {n.name: n for n in build_tree(base.manifest.fields)}
    next_id = next_field_id(base.manifest)  # (after the ids data files list too: they hold them)
    out: list[LanceField] = []
    for f in schema:
        old = by_name.get(f.name)
        if old is not None:
            if old.arrow_type != f.type:
                raise SchemaError(
                    f"{what} schema gives column {f.name!r} the type {f.type}, but the dataset stores "
                    f"it as {old.arrow_type}"
                )
            out.extend(n.field for n in old.walk())
        else:
            new = fields_from_arrow([f], first_id=next_id)
            next_id += len(new)
            out.extend(new)
    return tuple(out), {k.decode(): v for k, v in (schema.metadata or {}).items()}


def _merge(base: Snapshot, op: LanceOperation.Merge) -> Merge:
    fields, metadata = _schema_fields(base, op.schema, "Merge")
    build_tree(fields)
    _check_kept_types(base, fields, "Merge")
    frags = tuple(m.to_fragment() for m in op.fragments)
    old = _known(base, [f.id for f in frags])
    missing = sorted({f.id for f in base.manifest.fragments} - set(old))
    if missing:
        raise ValueError(f"a Merge must list every fragment of the dataset; fragments {missing} are missing")
    new_files = []
    for frag in frags:
        before = old[frag.id]
        if frag.physical_rows != before.physical_rows or frag.deletion_file != before.deletion_file:
            raise ValueError(
                f"fragment {frag.id} of the Merge has other rows or deletions than in the dataset"
            )
        kept = [d for d in frag.files if d in before.files]
        if len(kept) != len(before.files):
            raise ValueError(
                f"fragment {frag.id} of the Merge does not keep the data files it has in the dataset"
            )
        added = tuple(d for d in frag.files if d not in before.files)
        if added:
            new_files.append(replace(frag, files=added, deletion_file=None))
        frag_fields = {i for d in frag.files for i in d.fields}
        unknown = sorted(frag_fields - {f.id for f in fields} - {-2})
        if unknown:
            raise SchemaError(
                f"fragment {frag.id} stores field ids {unknown}, which the Merge's schema does not have"
            )
    _check_new_files(base, fields, new_files)
    frags = tuple(replace(f, row_id_meta=old[f.id].row_id_meta) for f in frags)
    return Merge(frags, fields, metadata, bool(op.preserves_nullability))


def _update(base: Snapshot, op: LanceOperation.Update) -> Update:
    if op.update_mode not in _UPDATE_MODES:
        raise ValueError(f"update_mode must be 'rewrite_rows' or 'rewrite_columns', got {op.update_mode!r}")
    removed = tuple(int(i) for i in op.removed_fragment_ids)
    updated = tuple(m.to_fragment() for m in op.updated_fragments)
    old = _known(base, [*removed, *(f.id for f in updated)])
    field_ids = {f.id for f in base.manifest.fields}
    unknown = sorted(set(op.fields_modified) - field_ids)
    if unknown:
        raise SchemaError(f"fields_modified names field ids {unknown}, which the schema does not have")
    changed_files = []
    for frag in updated:
        before = old[frag.id]
        if frag.physical_rows != before.physical_rows:
            raise ValueError(
                f"updated fragment {frag.id} has {frag.physical_rows} rows, not {before.physical_rows}"
            )
        added = tuple(d for d in frag.files if d not in before.files)
        if added:
            changed_files.append(replace(frag, files=added, deletion_file=None, row_id_meta=b""))
        if frag.deletion_file is not None and frag.deletion_file != before.deletion_file:
            read_deletions(base.storage, frag, version=base.version)  # the file exists and reads
    _check_new_files(base, base.manifest.fields, changed_files)
    new = tuple(m.to_fragment() for m in op.new_fragments)
    for f in new:
        if f.deletion_file is not None:
            raise ValueError(
                "new fragments of an Update cannot carry deletion files (they get new ids on commit)"
            )
    _check_new_files(base, base.manifest.fields, new)
    # Fragments of the dataset keep their row ids (pylance asks callers to pass the metadata back).
    updated = tuple(f if f.row_id_meta else replace(f, row_id_meta=old[f.id].row_id_meta) for f in updated)
    return Update(
        removed,
        updated,
        new,
        tuple(int(i) for i in op.fields_modified),
        tuple(int(i) for i in op.fields_for_preserving_frag_bitmap),
        _UPDATE_MODES[op.update_mode],
    )


def _project(base: Snapshot, op: LanceOperation.Project) -> Project:
    lance = as_lance_schema(op.schema)
    if lance is None:
        raise TypeError(f"Project schema must be a LanceSchema, got {type(op.schema)}")
    fields = lance.lance_fields
    known = {f.id for f in base.manifest.fields}
    unknown = sorted({f.id for f in fields} - known)
    if unknown:
        raise SchemaError(
            f"Project schema has field ids {unknown}, which the dataset does not have (a Project only "
            "renames, drops or reorders existing fields; add columns with Merge)"
        )
    _check_kept_types(base, fields, "Project")
    metadata = lance.metadata or dict(base.manifest.schema_metadata)
    return Project(fields, bool(op.preserves_nullability), metadata)


def _update_map(value: Any, what: str) -> UpdateMap | None:
    if value is None:
        return None
    if hasattr(value, "updates") and hasattr(value, "replace"):  # ours or pylance's UpdateMap
        updates, replace_all = dict(value.updates), value.replace
    elif isinstance(value, Mapping):
        updates, replace_all = dict(value), False
    else:
        raise TypeError(f"{what} must be a LanceOperation.UpdateMap, got {type(value)}")
    for k, v in updates.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise TypeError(f"{what} maps str to str or None, got {k!r}: {v!r}")
    return UpdateMap(tuple(updates.items()), bool(replace_all))


def _update_config(base: Snapshot, op: LanceOperation.UpdateConfig) -> UpdateConfig:
    fields = {
        int(k): _update_map(v, f"field_metadata_updates[{k}]")
        for k, v in (op.field_metadata_updates or {}).items()
    }
    unknown = sorted(set(fields) - {f.id for f in base.manifest.fields})
    if unknown:
        raise SchemaError(f"field_metadata_updates names field ids {unknown}, which the schema does not have")
    return UpdateConfig(
        _update_map(op.config_updates, "config_updates"),
        _update_map(op.table_metadata_updates, "table_metadata_updates"),
        _update_map(op.schema_metadata_updates, "schema_metadata_updates"),
        {k: v for k, v in fields.items() if v is not None},
    )


def _data_file(value: Any) -> fmt.DataFile:
    """Ours or pylance's DataFile, as the format's."""
    return fmt.DataFile(
        path=str(value.path),
        fields=tuple(int(i) for i in value.fields),
        column_indices=tuple(int(i) for i in (value.column_indices or [])),
        file_major_version=int(value.file_major_version),
        file_minor_version=int(value.file_minor_version),
        file_size_bytes=getattr(value, "file_size_bytes", None),
        base_id=getattr(value, "base_id", None),
    )


def _data_replacement(base: Snapshot, op: LanceOperation.DataReplacement) -> DataReplacement:
    groups = [(int(g.fragment_id), _data_file(g.new_file)) for g in op.replacements]
    old = _known(base, [i for i, _ in groups])
    if len({d.fields for _, d in groups}) > 1:
        raise ValueError("the new data files of a DataReplacement must all hold the same fields")
    _check_new_files(
        base,
        base.manifest.fields,
        [fmt.Fragment(frag_id, (d,), old[frag_id].physical_rows) for frag_id, d in groups],
    )
    return DataReplacement(tuple(groups))


__all__ = ["LanceSchema", "plan_inplace"]
