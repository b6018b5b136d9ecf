"""pylance's ``lance.debug``: a fragment's and a schema's metadata as readable text.

The text has the shape pylance prints (its Rust structures' pretty debug form: ``Name {``, one
``field: value,`` a line, four spaces of indent a level), for reading and for comparing with
pylance's output; it is not a format to parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lance_table.schema import LanceField
from lance_table.table.fragment_metadata import FragmentMetadata

__all__ = ["format_fragment", "format_schema"]

_ENCODINGS = {1: "Plain", 2: "VarBinary", 3: "Dictionary", 4: "RLE"}
_INDENT = "    "


class _Struct:
    def __init__(self, name: str, fields: Sequence[tuple[str, Any]]) -> None:
        self.name, self.fields = name, fields


class _Tuple:
    def __init__(self, name: str, values: Sequence[Any]) -> None:
        self.name, self.values = name, values


class _Raw(str):
    """Printed as is (numbers, enum variants, ``None``)."""


def _some(value: Any) -> Any:
    return _Raw("None") if value is None else _Tuple("Some", [value])


def _render(value: Any, depth: int = 0) -> str:
    pad, inner = _INDENT * depth, _INDENT * (depth + 1)
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, _Struct):
        lines = [f"{inner}{k}: {_render(v, depth + 1)}," for k, v in value.fields]
        return f"{value.name} {{\n" + "\n".join(lines) + f"\n{pad}}}"
    if isinstance(value, _Tuple):
        lines = [f"{inner}{_render(v, depth + 1)}," for v in value.values]
        return f"{value.name}(\n" + "\n".join(lines) + f"\n{pad})"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        lines = [f"{inner}{_render(k)}: {_render(v, depth + 1)}," for k, v in value.items()]
        return "{\n" + "\n".join(lines) + f"\n{pad}}}"
    items = list(value)
    if not items:
        return "[]"
    return "[\n" + "\n".join(f"{inner}{_render(v, depth + 1)}," for v in items) + f"\n{pad}]"


def _field(f: LanceField, children: list[Any]) -> _Struct:
    metadata = {
        k: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for k, v in f.metadata.items()
    }
    encoding = _ENCODINGS.get(f.encoding)
    return _Struct(
        "Field",
        [
            ("name", f.name),
            ("id", f.id),
            ("parent_id", f.parent_id),
            ("logical_type", _Tuple("LogicalType", [f.logical_type])),
            ("metadata", metadata),
            ("encoding", _some(None if encoding is None else _Raw(encoding))),
            ("nullable", f.nullable),
            ("children", children),
            ("dictionary", _Raw("None")),
            ("unenforced_primary_key_position", _Raw("None")),
            ("unenforced_clustering_key_position", _Raw("None")),
        ],
    )


def _schema(fields: Iterable[LanceField], metadata: Mapping[str, Any]) -> _Struct:
    fields = list(fields)
    by_parent: dict[int, list[LanceField]] = {}
    for f in fields:
        by_parent.setdefault(f.parent_id, []).append(f)

    def tree(parent: int) -> list[Any]:
        return [_field(f, tree(f.id)) for f in by_parent.get(parent, [])]

    meta = {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for k, v in metadata.items()}
    return _Struct("Schema", [("fields", tree(-1)), ("metadata", meta)])


def _with_parents(fields: Sequence[LanceField], ids: Iterable[int]) -> list[LanceField]:
    by_id = {f.id: f for f in fields}
    keep: set[int] = set()
    for i in ids:
        while i in by_id and i not in keep:
            keep.add(i)
            i = by_id[i].parent_id
    return [f for f in fields if f.id in keep]


def _manifest(dataset: Any) -> Any:
    snapshot = getattr(dataset, "_snapshot", None)
    if snapshot is None:
        raise TypeError(f"expected a dataset, not {type(dataset).__name__}")
    return snapshot.manifest


def format_fragment(fragment: FragmentMetadata, dataset: Any) -> str:
    """The metadata of ``fragment`` (of ``dataset``) as text shaped like pylance's: its data files
    (with the part of the schema each stores and its format version), deletion file and rows.

    Raises:
        TypeError: ``fragment`` is not a FragmentMetadata or ``dataset`` not a dataset.

    Example:
        ```python
        from lance_table.debug import format_fragment

        print(format_fragment(ds.get_fragments()[0].metadata, ds))  # PrettyPrintableFragment { ...
        ```
    """
    if not isinstance(fragment, FragmentMetadata):
        raise TypeError(f"format_fragment() takes a FragmentMetadata, not {type(fragment).__name__}")
    manifest = _manifest(dataset)
    files = [
        _Struct(
            "PrettyPrintableDataFile",
            [
                ("path", f.path),
                ("fields", list(f.fields)),
                ("column_indices", list(f.column_indices)),
                ("schema", _schema(_with_parents(manifest.fields, f.fields), manifest.schema_metadata)),
                ("major_version", f.file_major_version),
                ("minor_version", f.file_minor_version),
            ],
        )
        for f in fragment.files
    ]
    d = fragment.deletion_file
    deletion = None
    if d is not None:
        deletion = _Struct(
            "DeletionFile",
            [
                ("read_version", d.read_version),
                ("id", d.id),
                ("file_type", _Raw(d.file_type.capitalize())),
                ("num_deleted_rows", _some(d.num_deleted_rows)),
                ("base_id", _some(d.base_id)),
            ],
        )
    text = _Struct(
        "PrettyPrintableFragment",
        [
            ("id", fragment.id),
            ("files", files),
            ("deletion_file", _some(deletion)),
            ("physical_rows", _some(fragment.physical_rows)),
        ],
    )
    return _render(text)


def format_schema(dataset: Any) -> str:
    """The Lance schema of ``dataset`` (field ids, parents, logical types, encodings) as text
    shaped like pylance's.

    Raises:
        TypeError: ``dataset`` is not a dataset.

    Example:
        ```python
        from lance_table.debug import format_schema

        print(format_schema(ds))  # Schema { fields: [ Field { name: "id", id: 0, ...
        ```
    """
    manifest = _manifest(dataset)
    return _render(_schema(manifest.fields, manifest.schema_metadata))
