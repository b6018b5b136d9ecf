"""Checking fragments built by hand (by workers, or by pylance) before a commit: their data files
must be in this dataset, in its data format, with the rows their metadata says, and each column
the metadata gives a field of the schema must hold that field's type.

What pylance accepts is accepted: columns are the fields the metadata's ids and column indices say,
whatever the file names them; fields a file lacks read as nulls; columns and ids the schema does not
have are ignored (and no new field takes their ids). What pylance refuses is refused the same way
(:class:`FragmentMetadataError`), and so is what would read wrong: another type, another row count,
a column outside the file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from lance_table._parallel import METADATA, map_on
from lance_table.errors import BasePathError, FragmentMetadataError, SchemaError, UnsupportedFormatError
from lance_table.file.fields import BLOB_KEY, is_blob
from lance_table.file.v2_0.layout import is_packed_struct
from lance_table.file.v2_1.blob_v2 import read_node
from lance_table.format import paths
from lance_table.format.bases import BasePath
from lance_table.format.manifest import DataFile, Fragment
from lance_table.schema import FieldNode, LanceField, build_tree
from lance_table.storage import Storage
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.write import LEGACY_FORMAT

TOMBSTONE = -2  # the field id of a column a later data file of the fragment replaced


def check_fragments(
    storage: Storage,
    fields: Sequence[LanceField],
    data_format: str,
    frags: Sequence[Fragment],
    bases: Mapping[int, BasePath] | None = None,
) -> None:
    """Check that fragments' data files are in this dataset (or in the registered base path their
    ``base_id`` names, of ``bases``), in ``data_format``, with the rows their metadata says and the
    types of ``fields`` in the columns the metadata gives them (see the module's docstring).
    Footers are read on threads.

    Raises:
        BasePathError: a data file names a base id the dataset does not register.
        UnsupportedFormatError: a data file of another format.
        FragmentMetadataError: a data file's field ids and column indices are not as many, or a
            leaf field of a 2.1+ file has no column (pylance refuses both).
        SchemaError: a data file stores a field as another type.
        DataFileNotFoundError: a data file does not exist in this dataset.
        CorruptFileError: a data file's path is not a plain name, or it holds another number of rows.
    """
    roots = {n.name: read_node(n) for n in build_tree(tuple(fields))}
    by_id = {n.id: n for root in roots.values() for n in root.walk()}
    if data_format == LEGACY_FORMAT and any(pa.types.is_dictionary(n.arrow_type) for n in by_id.values()):
        raise UnsupportedFormatError("fragments of legacy datasets with dictionary columns are not committed")
    for frag in frags:
        for f in frag.files:
            paths.check_relative_path(f.path, "fragment metadata", "data file")
            if f.base_id is not None and f.base_id not in (bases or {}):
                raise BasePathError(
                    f"data file {f.path} is in base path {f.base_id}, which the dataset does not register "
                    f"(registered: {sorted(bases or {})})",
                    reference=str(f.base_id),
                )
            if f.version != data_format:
                raise UnsupportedFormatError(
                    f"data file {f.path} is format {f.version}, but the dataset stores format {data_format}"
                )
            if data_format != LEGACY_FORMAT:
                _check_columns(f, frag.id, by_id, data_format)

    def check(frag: Fragment) -> None:
        reader = FragmentReader(frag, storage, roots, bases=dict(bases or {}))
        reader.physical_rows  # noqa: B018 - reads every footer: the files exist and hold these rows
        for f in frag.files:
            stored = reader.stored_roots(f)  # by the manifest's column indices, as pylance reads
            for node in (n for r in stored.values() for n in r.walk()):
                _check_field(by_id.get(node.id), node, f.path)

    map_on(METADATA, check, frags)


def _check_columns(f: DataFile, frag_id: int, by_id: Mapping[int, FieldNode], data_format: str) -> None:
    """Raises: FragmentMetadataError: what pylance's commit refuses of a data file's ids and
    column indices."""
    if f.column_indices and len(f.column_indices) != len(f.fields):
        raise FragmentMetadataError(
            f"data file {f.path} (fragment {frag_id}) has {len(f.fields)} field ids but "
            f"{len(f.column_indices)} column indices: they must be as many"
        )
    if data_format == "2.0":
        return  # a field without a column reads as nulls
    for fid, col in zip(f.fields, f.column_indices):
        node = by_id.get(fid)
        if col < 0 and node is not None and (not node.children or is_packed_struct(node) or is_blob(node)):
            raise FragmentMetadataError(
                f"data file {f.path} (fragment {frag_id}) gives field {node.name!r} (id {fid}) "
                f"column index {col}: a leaf field of a {data_format} file must have a column"
            )


def _check_field(expected: FieldNode | None, stored: FieldNode, path: str) -> None:
    """Raises: SchemaError: the file stores the field as another type (its name may differ: the
    metadata's ids say which field a column holds, as pylance reads it)."""
    if expected is None or BLOB_KEY in stored.field.metadata or BLOB_KEY in expected.field.metadata:
        return  # a 2.1+ file lists only leaves, a 2.0 file may hold more; blobs are checked on read
    if not expected.children and not _same_type(expected.arrow_type, stored.arrow_type):
        raise SchemaError(
            f"data file {path} stores field {stored.id} as {stored.name!r} ({stored.arrow_type}), "
            f"but the schema has {expected.name!r} ({expected.arrow_type})"
        )


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_dictionary(a):
        a = a.value_type
    if pa.types.is_dictionary(b):
        b = b.value_type
    return bool(a == b)
