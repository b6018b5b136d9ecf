"""Checking fragments built by hand (by workers, or by pylance) before a commit: their data files
must be in this dataset, in its data format, with the rows their metadata says and the fields of the
schema (by id, name and type)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from lance_table._parallel import METADATA, map_on
from lance_table.errors import BasePathError, SchemaError, UnsupportedFormatError
from lance_table.file.fields import BLOB_KEY
from lance_table.file.v2_1.blob_v2 import read_node
from lance_table.format import paths
from lance_table.format.bases import BasePath
from lance_table.format.manifest import Fragment
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
    fields of ``fields`` (by id, name and type). Footers are read on threads.

    Raises:
        BasePathError: a data file names a base id the dataset does not register.
        UnsupportedFormatError: a data file of another format.
        SchemaError: a data file is listed with a field id the schema does not have, or stores a
            field under another name or type.
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
            unknown = sorted(set(f.fields) - set(by_id) - {TOMBSTONE})  # -2: a dropped copy
            if unknown:
                raise SchemaError(
                    f"data file {f.path} stores field ids {unknown}, which the schema does not have"
                )

    def check(frag: Fragment) -> None:
        reader = FragmentReader(frag, storage, roots, bases=dict(bases or {}))
        reader.physical_rows  # noqa: B018 - reads every footer: the files exist and hold these rows
        for f in frag.files:
            stored = reader.stored_roots(f)  # by the manifest's column indices, as pylance reads
            for node in (n for r in stored.values() for n in r.walk()):
                _check_field(by_id.get(node.id), node, f.path)

    map_on(METADATA, check, frags)


def _check_field(expected: FieldNode | None, stored: FieldNode, path: str) -> None:
    """Raises: SchemaError: the file stores the field under another name or type."""
    if expected is None or BLOB_KEY in stored.field.metadata or BLOB_KEY in expected.field.metadata:
        return  # a 2.1+ file lists only leaves, a 2.0 file may hold more; blobs are checked on read
    if expected.name != stored.name or (
        not expected.children and not _same_type(expected.arrow_type, stored.arrow_type)
    ):
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
