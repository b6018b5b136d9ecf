"""Which of a data file's fields holds each dataset field: found by the manifest's
``DataFile.fields`` and ``column_indices`` (field ``fields[i]`` is the file's column
``column_indices[i]``), not by the field ids the file stores, as pylance reads a fragment.

A file written on its own (with the file API, then attached with ``create_from_file``) numbers its
fields 0, 1, ... whatever the dataset's ids are: the manifest is what ties its columns to the
dataset's fields. The file's field tree is renumbered with the manifest's ids, so that the rest of
the reader (which matches nested children by id) works unchanged.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.errors import CorruptFileError, SchemaError
from lance_table.file.fields import BLOB_KEY
from lance_table.format.manifest import DataFile
from lance_table.schema import FieldNode, LanceField, build_tree

#: the id of a field a later data file of the fragment replaced
TOMBSTONE = -2

# Per open reader: the renumbered roots, by the data file's (fields, column_indices).
_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple[tuple[int, ...], tuple[int, ...]], dict[int, FieldNode]]]
_CACHE = weakref.WeakKeyDictionary()


def stored_roots(
    reader: Any, data_file: DataFile, dataset: Mapping[int, FieldNode], where: Callable[[], str]
) -> dict[int, FieldNode]:
    """The top-level fields of the file ``reader`` reads, by the dataset field id the manifest
    gives their columns (``dataset``: every dataset field, by id, at any depth; ``where``: the
    manifest listing the file, for messages).

    Raises:
        CorruptFileError: a column index lies outside the file, two fields claim one column, a
            column is not a field's, or the field there is of another type than the dataset's
            (the error names the manifest, by ``where()``, and its message the data file).
    """
    meta = reader.metadata
    col_of: Mapping[int, int] | None = getattr(reader, "_col_of", None)
    if col_of is None:  # legacy files: the view maps them
        return dict(meta.roots_by_id)
    key = (tuple(data_file.fields), tuple(data_file.column_indices))
    # the 2.1/2.2 files of a dataset share their (immutable) fields and the columns of their
    # leaves: one that numbers its fields as the manifest does gives them as they are, found
    # once for all of them (a 2.0 file's columns depend on its pages: found file by file)
    shared = getattr(reader, "_structural", False)
    same = (id(meta.fields), id(col_of), len(meta.columns), key)
    hit = _AS_STORED.get(same) if shared else None
    if hit is not None and hit[0] is meta.fields and hit[1] is col_of:
        return hit[2]
    per_reader = _CACHE.setdefault(reader, {})
    found = per_reader.get(key)
    if found is None:
        found = per_reader[key] = _renumbered(meta, col_of, data_file, dataset, where)
        by_id = meta.roots_by_id
        if shared and found.keys() == by_id.keys() and all(found[i] is n for i, n in by_id.items()):
            _AS_STORED.put(same, (meta.fields, col_of, found))  # (kept: their ids stay theirs)
    return found


#: the fields of 2.1/2.2 files that number them as the manifest does, by the identity of their
#: fields and leaf columns, their column count and the manifest's fields and column indices
#: (see :func:`stored_roots`)
_AS_STORED: LRU[tuple[Any, ...], tuple[tuple[LanceField, ...], Mapping[int, int], dict[int, FieldNode]]] = (
    LRU(256)
)


def _renumbered(
    meta: Any,
    col_of: Mapping[int, int],
    data_file: DataFile,
    dataset: Mapping[int, FieldNode],
    where: Callable[[], str],
) -> dict[int, FieldNode]:
    file_id_at = {c: i for i, c in col_of.items()}
    n_cols = len(meta.columns)
    to_manifest: dict[int, int] = {}
    claimed: dict[int, int] = {}
    for fid, col in zip(data_file.fields, data_file.column_indices):
        if col < 0 or fid == TOMBSTONE:
            continue
        if col >= n_cols:
            raise CorruptFileError(
                where(),
                f"data file {data_file.path}: field {fid} is given column {col}, "
                f"but the file has {n_cols} columns",
            )
        if col in claimed and claimed[col] != fid:
            raise CorruptFileError(
                where(),
                f"data file {data_file.path}: fields {claimed[col]} and {fid} "
                f"are given the same column {col}",
            )
        claimed[col] = fid
        file_id = file_id_at.get(col)
        if file_id is None:
            raise CorruptFileError(
                where(),
                f"data file {data_file.path}: field {fid} is given column {col}, "
                "which holds no field of the file",
            )
        to_manifest[file_id] = fid
    if all(k == v for k, v in to_manifest.items()) and all(i in to_manifest for i in col_of):
        return dict(meta.roots_by_id)  # the file numbers its fields as the dataset does
    # A column the manifest gives no field (its index -1, or no indices at all) holds none: its
    # field reads as nulls, as in pylance.
    by_file_id = {n.id: n for root in meta.roots for n in root.walk()}
    parent_of = {c.id: n.id for n in dataset.values() for c in n.children}
    for root in meta.roots:
        _derive_parents(root, to_manifest, parent_of, data_file.path, where)
    for file_id, fid in to_manifest.items():
        _check_type(by_file_id[file_id], dataset.get(fid), fid, data_file.path, where)
    spare = -1000  # fields the manifest does not claim: ids no dataset field has
    fields: list[LanceField] = []
    new_id: dict[int, int] = {}
    for f in meta.fields:
        if f.id not in to_manifest:
            spare -= 1
        new_id[f.id] = to_manifest.get(f.id, spare)
    try:
        for f in meta.fields:
            parent = -1 if f.parent_id == -1 else new_id.get(f.parent_id, f.parent_id)
            fields.append(replace(f, id=new_id[f.id], parent_id=parent))
        roots = build_tree(fields)
    except SchemaError as exc:
        raise CorruptFileError(
            where(), f"data file {data_file.path}: its fields do not map onto the ids given: {exc}"
        ) from None
    return {n.id: n for n in roots}


def _derive_parents(
    node: FieldNode,
    to_manifest: dict[int, int],
    parent_of: Mapping[int, int],
    path: str,
    where: Callable[[], str],
) -> None:
    """Give a struct or list of a 2.1+ file (whose columns are its leaves') the id of the dataset
    field that is its children's parent."""
    for child in node.children:
        _derive_parents(child, to_manifest, parent_of, path, where)
    if node.id in to_manifest or not node.children:
        return
    parents = set()
    for child in node.children:
        fid = to_manifest.get(child.id)
        if fid is not None and fid in parent_of:
            parents.add(parent_of[fid])
    if len(parents) > 1:
        raise CorruptFileError(
            where(),
            f"data file {path}: the children of its field {node.name!r} "
            f"map to fields of parents {sorted(parents)}",
        )
    if parents:
        to_manifest[node.id] = parents.pop()


def _check_type(
    stored: FieldNode, expected: FieldNode | None, fid: int, path: str, where: Callable[[], str]
) -> None:
    """Raises: CorruptFileError: the column the manifest names holds a value of another type."""
    if expected is None or stored.children or expected.children:
        return
    if BLOB_KEY in stored.field.metadata or BLOB_KEY in expected.field.metadata:
        return
    a, b = stored.arrow_type, expected.arrow_type
    if pa.types.is_dictionary(a):
        a = a.value_type
    if pa.types.is_dictionary(b):
        b = b.value_type
    if a != b:
        raise CorruptFileError(
            where(),
            f"data file {path}: field {fid} ({expected.name!r}, {expected.arrow_type}) is given the "
            f"column of the file's {stored.name!r}, which holds {stored.arrow_type}",
        )
