"""``drop_columns`` and ``alter_columns`` as pylance makes them: dropping, renaming and changing
nullability only write a new schema (a ``Project`` transaction; field ids are kept, data files
untouched); a cast gives the field a new id and writes its values into a new data file of each
fragment (a ``Merge``), leaving the other columns' files alone."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import SchemaChangeError, SchemaError
from lance_table.format.manifest import Fragment
from lance_table.format.operations import Merge, Project
from lance_table.schema import FieldNode, LanceField, build_tree, fields_from_arrow
from lance_table.table.commit import Pending
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations import schema_add as add
from lance_table.table.snapshot import Snapshot

# The id a data file lists for a field it no longer provides (pylance's tombstone).
TOMBSTONE = -2

ALTER_KEYS = frozenset({"path", "name", "nullable", "data_type"})


def find_field(fields: Sequence[LanceField], path: str) -> LanceField | None:
    """The field at a dot-separated path (``"a.b.c"``), or None."""
    parent, found = -1, None
    for part in path.split("."):
        found = next((f for f in fields if f.parent_id == parent and f.name == part), None)
        if found is None:
            return None
        parent = found.id
    return found


def descendants(fields: Sequence[LanceField], root: int) -> set[int]:
    """The id ``root`` and the ids of every field below it."""
    out = {root}
    for f in fields:  # fields are in pre-order: parents come before children
        if f.parent_id in out:
            out.add(f.id)
    return out


def plan_drop_columns(ds: Snapshot, columns: Iterable[str]) -> Pending:
    """The Project that drops ``columns`` (top-level names or nested paths).

    Raises:
        SchemaError: a column does not exist (a ValueError, as in pylance), or nothing would be left.
    """
    if isinstance(columns, str):
        columns = [columns]
    fields = ds.manifest.fields
    gone: set[int] = set()
    for path in columns:
        f = find_field(fields, path)
        if f is None:
            raise SchemaError(f"Column {path} does not exist in the dataset")
        gone |= descendants(fields, f.id)
    kept = tuple(f for f in fields if f.id not in gone)
    if not any(f.parent_id == -1 for f in kept):
        raise SchemaError("Cannot drop all columns from a dataset")
    return Pending(Project(kept, True, ds.manifest.schema_metadata), ds.version)


def _castable(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether pylance's ``alter_columns`` casts ``old`` to ``new``: integers to integers, floats to
    floats, and strings, binaries and lists to their size variants."""
    t = pa.types
    if t.is_integer(old) and t.is_integer(new):
        return True
    if t.is_floating(old) and t.is_floating(new):
        return True
    strings = (t.is_string(old) or t.is_large_string(old)) and (t.is_string(new) or t.is_large_string(new))
    binaries = (t.is_binary(old) or t.is_large_binary(old)) and (t.is_binary(new) or t.is_large_binary(new))
    lists = (t.is_list(old) or t.is_large_list(old)) and (t.is_list(new) or t.is_large_list(new))
    if lists:
        return bool(old.value_type == new.value_type or _castable(old.value_type, new.value_type))
    return strings or binaries


def _check_no_nulls(ds: Snapshot, path: str) -> None:
    """Raises SchemaChangeError when the column at ``path`` holds a null in a live row."""
    from lance_table.table.scan import READ_CHUNK_ROWS, make_spec, matching_positions

    quoted = ".".join(f"`{p}`" for p in path.split("."))
    spec = make_spec(ds.schema, [], f"{quoted} IS NULL", False, None, None, None)
    for frag in ds.fragment_readers():
        for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS):
            if matching_positions(frag, spec, lo, min(lo + READ_CHUNK_ROWS, frag.physical_rows)).total:
                raise SchemaChangeError(
                    f"Column {path!r} cannot be made non-nullable: it contains null values"
                )


def _alteration(fields: Sequence[LanceField], alt: Mapping[str, Any]) -> tuple[LanceField, dict[str, Any]]:
    if not isinstance(alt, Mapping):
        raise TypeError(f"an alteration must be a dict with 'path', not {type(alt).__name__}")
    unknown = set(alt) - ALTER_KEYS
    if unknown or "path" not in alt:
        raise SchemaChangeError(
            f"an alteration takes 'path' and any of 'name', 'nullable', 'data_type'; got {sorted(alt)}"
        )
    f = find_field(fields, alt["path"])
    if f is None:
        raise SchemaChangeError(f'Column "{alt["path"]}" does not exist in the dataset')
    return f, {k: v for k, v in alt.items() if k != "path" and v is not None}


def plan_alter_columns(ds: Snapshot, alterations: Sequence[Mapping[str, Any]]) -> Pending:
    """The Project (renames, nullability) or Merge (casts: new data files) for ``alterations``.

    Raises:
        SchemaChangeError: a path does not exist, a new name is taken, a cast is not allowed or a
            value does not fit the new type, or a column with nulls would become non-nullable.
        TypeError: an alteration is not a dict.
    """
    fields = list(ds.manifest.fields)
    casts: dict[int, pa.DataType] = {}
    by_id = {f.id: i for i, f in enumerate(fields)}
    altered: set[int] = set()
    for alt in alterations:
        f, change = _alteration(fields, alt)
        altered.add(f.id)
        path = alt["path"]
        new = fields[by_id[f.id]]
        if "name" in change:
            name = change["name"]
            if any(g.parent_id == f.parent_id and g.name == name and g.id != f.id for g in fields):
                raise SchemaChangeError(f'Column "{name}" already exists in the dataset')
            new = replace(new, name=name)
        if "nullable" in change:
            if not change["nullable"] and new.nullable:
                _check_no_nulls(ds, path)
            new = replace(new, nullable=bool(change["nullable"]))
        if "data_type" in change:
            target = change["data_type"]
            if not isinstance(target, pa.DataType):
                raise TypeError(f"data_type must be a pyarrow DataType, not {type(target).__name__}")
            old_type = _node(ds, f.id).arrow_type
            if f.parent_id != -1:
                _check_nested_cast(ds, path)
            if old_type != target:
                if not _castable(old_type, target):
                    # (pylance's words and Arrow type names, which its users match)
                    old_name, new_name = _arrow_name(old_type), _arrow_name(target)
                    raise SchemaChangeError(f'Cannot cast column "{path}" from {old_name} to {new_name}')
                casts[f.id] = target
        fields[by_id[f.id]] = new
    # pylance records whether every altered field is nullable
    nullable = all(fields[by_id[i]].nullable for i in altered)
    if not casts:
        return Pending(Project(tuple(fields), nullable, ds.manifest.schema_metadata), ds.version)
    _check_not_indexed(ds, casts)
    return _plan_casts(ds, fields, casts, nullable)


def _node(ds: Snapshot, field_id: int) -> FieldNode:
    for root in build_tree(ds.manifest.fields):
        for n in root.walk():
            if n.id == field_id:
                return n
    raise SchemaChangeError(f"field id {field_id} is not in the schema")  # pragma: no cover


def _check_nested_cast(ds: Snapshot, path: str) -> None:
    """Raises SchemaChangeError unless a nested field at ``path`` can be cast: below structs
    only, in a legacy dataset or one of format 2.1 or later (pylance casts nested fields of 2.0
    files too, but its result does not read back)."""
    fields = ds.manifest.fields
    parts = path.split(".")
    for depth in range(1, len(parts)):
        above = find_field(fields, ".".join(parts[:depth]))
        if above is None or above.logical_type != "struct":
            raise SchemaChangeError(f"Cannot cast column {path!r}: only fields below structs can be cast")
    if add.writable_data_format(ds.manifest, ds.uri) == "2.0":
        raise SchemaChangeError(
            f"Cannot cast the nested column {path!r} of a dataset of format 2.0: 2.0 files cannot "
            "hold a struct's fields in separate files (pylance's result of this cast does not read "
            "back); nested casts need format 2.1 or later, or the legacy format"
        )


def _check_not_indexed(ds: Snapshot, casts: Mapping[int, pa.DataType]) -> None:
    """Raises SchemaChangeError when a column to cast has an index (pylance refuses it: the cast
    would leave the index pointing at the old values)."""
    from lance_table._proto import table_pb2

    section = ds.manifest.index_section
    if not section:
        return
    names = {f.id: f.name for f in ds.manifest.fields}
    indices = table_pb2.IndexSection.FromString(section).indices
    hit = sorted({idx.name for idx in indices if set(idx.fields) & set(casts)})
    if hit:
        cols = sorted(names[i] for i in casts if any(i in idx.fields for idx in indices))
        raise SchemaChangeError(
            f"Cannot cast column(s) [{', '.join(cols)}] to a new type: they have {len(hit)} index(es) "
            f"attached: [{', '.join(hit)}]. Drop the index(es) with drop_index() before altering, then "
            "recreate them after the cast completes."
        )


def _plan_casts(
    ds: Snapshot, fields: list[LanceField], casts: dict[int, pa.DataType], nullable: bool
) -> Pending:
    """Write each cast field into a new data file per fragment (new field ids; a nested field
    under its structs, which keep their ids) and merge the new schema."""
    first = add.next_field_id(ds.manifest)
    new: dict[int, list[LanceField]] = {}  # cast field id -> its new field and children
    by_id = {f.id: f for f in fields}
    for f in (by_id[i] for i in casts):  # in the order of the alterations, as pylance numbers them
        arrow = pa.field(f.name, casts[f.id], f.nullable, metadata=dict(f.metadata) or None)
        made = fields_from_arrow([arrow], first_id=first)
        made[0] = replace(made[0], parent_id=f.parent_id, metadata=f.metadata)
        first += len(made)
        new[f.id] = made
    # the file holds the cast fields, nested ones under their (unchanged) ancestors
    ancestors: set[int] = set()
    parent = {f.id: f.parent_id for f in fields}
    for i in casts:
        p = parent[i]
        while p != -1:
            ancestors.add(p)
            p = parent[p]
    file_fields: list[LanceField] = []
    schema_fields: list[LanceField] = []
    gone: set[int] = set()
    for i in casts:
        gone |= descendants(fields, i)
    for f in fields:
        if f.id in casts:
            file_fields.extend(new[f.id])
            schema_fields.extend(new[f.id])
        elif f.id not in gone:
            schema_fields.append(f)
            if f.id in ancestors:
                file_fields.append(f)
    file_tree = build_tree(file_fields)
    file_schema = pa.schema([n.to_arrow_field() for n in file_tree])
    tree = {n.id: n for n in build_tree(ds.manifest.fields)}
    roots = [
        tree[n.id if n.id in tree else next(i for i in casts if new[i][0].id == n.id)] for n in file_tree
    ]

    def compute(frag: FragmentReader, lo: int, live: np.ndarray, index: int) -> pa.Table:
        table = add.read_live(frag, [r.name for r in roots], live)
        cols = [_cast_part(c, r, fn, casts) for c, r, fn in zip(table.columns, roots, file_tree)]
        return pa.Table.from_arrays(cols, schema=file_schema)

    # deleted rows are cast too: a column made non-nullable must hold no null, read or not
    frags, _, written = add.write_columns(
        ds, file_schema, compute, add.SQL_CHUNK_ROWS, live_only=False, fields=file_fields
    )
    m = ds.manifest
    written_frags = {f.id: f for f in frags}
    remaining = {f.id for f in schema_fields}
    # a data file none of whose fields is left (it held only cast columns) leaves its fragment
    new_frags = tuple(
        replace(f, files=tuple(d for d in f.files if not d.fields or remaining.intersection(d.fields)))
        for f in (written_frags.get(f.id, f) for f in m.fragments)
    )
    if ancestors and add.writable_data_format(m, ds.uri) == add.LEGACY_FORMAT:
        old_files = {d.path for f in m.fragments for d in f.files}
        new_frags = _tombstone_ancestors(new_frags, ancestors, old_files)
    op = Merge(new_frags, tuple(schema_fields), dict(m.schema_metadata), preserves_nullability=nullable)
    return Pending(op, ds.version, written=tuple(written))


def _tombstone_ancestors(
    frags: tuple[Fragment, ...], ancestors: set[int], old_files: set[str]
) -> tuple[Fragment, ...]:
    """Legacy files list struct ids too: as pylance does, the structs above a nested cast belong
    to the new data file only, and the older files (``old_files``) list them as tombstones."""
    out = []
    for f in frags:
        files = tuple(
            replace(d, fields=tuple(TOMBSTONE if i in ancestors else i for i in d.fields))
            if d.path in old_files
            else d
            for d in f.files
        )
        out.append(replace(f, files=files))
    return tuple(out)


def _cast_part(
    col: pa.ChunkedArray, node: FieldNode, file_node: FieldNode, casts: Mapping[int, pa.DataType]
) -> pa.ChunkedArray:
    """The values of ``node`` as the new file stores them (``file_node``): cast if ``node`` is
    cast, else (a struct above cast fields) the struct of those parts with its own validity.

    Raises:
        SchemaChangeError: a value does not fit the new type.
    """
    target = file_node.arrow_type
    if node.id in casts:
        try:
            return col.cast(target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            why = _uncastable(col, target) or str(exc)
            raise SchemaChangeError(f"Cannot cast column {node.name!r} to {target}: {why}") from None
    arr = col.combine_chunks()
    kids = list(node.children)
    parts = []
    # the file's children are, in order, the children of ``node`` that are cast or hold cast fields
    wanted = [i for i, c in enumerate(kids) if c.id in casts or any(n.id in casts for n in c.walk())]
    for i, file_child in zip(wanted, file_node.children):
        part = _cast_part(pa.chunked_array([arr.field(i)]), kids[i], file_child, casts)
        parts.append(part.combine_chunks())
    mask = arr.is_null() if arr.null_count else None
    fields = [c.to_arrow_field() for c in file_node.children]
    return pa.chunked_array([pa.StructArray.from_arrays(parts, fields=fields, mask=mask)])


def _uncastable(col: pa.ChunkedArray, target: pa.DataType) -> str | None:
    """pylance's words for the first number that does not fit ``target`` ("Can't cast value 1024
    to type Int8"), or None when the values are not numbers."""
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)) or not (
        pa.types.is_integer(target) or pa.types.is_floating(target)
    ):
        return None
    arr = col.combine_chunks()
    try:
        back = arr.cast(target, safe=False).cast(arr.type, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    differs = pc.fill_null(pc.not_equal(arr, back), False).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(differs)
    if not bad.size:
        return None
    return f"Can't cast value {arr[int(bad[0])].as_py()} to type {_arrow_name(target)}"


_ARROW_NAMES = {
    pa.bool_(): "Boolean",
    pa.float16(): "Float16",
    pa.float32(): "Float32",
    pa.float64(): "Float64",
    pa.string(): "Utf8",
    pa.large_string(): "LargeUtf8",
    pa.binary(): "Binary",
    pa.large_binary(): "LargeBinary",
    pa.date32(): "Date32",
    pa.date64(): "Date64",
    pa.null(): "Null",
}


def _arrow_name(t: pa.DataType) -> str:
    """The name Arrow's Rust implementation (pylance's messages) gives a type: ``Int32``, ``Utf8``."""
    if t in _ARROW_NAMES:
        return _ARROW_NAMES[t]
    if pa.types.is_integer(t):
        return str(t).replace("uint", "UInt").replace("int", "Int")
    return str(t)
