"""Planning a write: what it builds on (append or replace), the schema and fields the rows are
written with, and the data file format; turning what a user passes into batches of that schema."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.errors import (
    AppendSchemaError,
    DatasetAlreadyExistsError,
    SchemaError,
    UnsupportedFormatError,
)
from lance_table.extensions import storage_schema
from lance_table.file.v2_1.blob_v2 import is_blob_v2
from lance_table.format.manifest import (
    DEFAULT_DATA_FORMAT,
    Fragment,
    Manifest,
    corrected_data_format,
)
from lance_table.format.transaction import Append, Operation, Overwrite
from lance_table.schema import (
    FieldNode,
    LanceField,
    arrow_schema_from_fields,
    build_tree,
    fields_from_arrow,
)
from lance_table.table import blob_write, versions
from lance_table.table.commit import Pending
from lance_table.table.operations.inputs import coerce_reader, conform, missing_fields, project_present
from lance_table.table.snapshot import BLOB_V2_FORMATS

WriteMode = Literal["create", "append", "overwrite"]
# pylance's file size limits (defined here, where the entry points import them without the writer)
DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024**3
# Data file formats lance_table writes into datasets.
WRITABLE_FORMATS = ("0.1", "2.0", "2.1", "2.2")
LEGACY_FORMAT = "0.1"


@dataclass(frozen=True)
class WritePlan:
    """How rows are written on top of version ``read_version`` (0: a new dataset).

    Small and picklable: a distributed write sends it to every task.

    Attributes:
        append: whether the rows are appended to the existing version (else they replace it).
        schema: the Arrow schema rows are written with (the dataset's, for an append).
        fields: the Lance fields (with their ids) of that schema.
        data_format: the data file format version, taken from the dataset.
        dictionaries: legacy datasets: the dictionary values of the version appended to, by field
            id (new files' keys index them, extended by values the rows bring).
    """

    read_version: int
    append: bool
    schema: pa.Schema
    fields: tuple[LanceField, ...]
    data_format: str
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict, compare=False)

    def operation(
        self, fragments: Sequence[Fragment], dictionaries: Mapping[int, pa.Array] | None = None
    ) -> Operation:
        """What committing ``fragments`` means: an Append to the base, or an Overwrite.
        ``dictionaries`` are the dictionary values the fragments' legacy files index."""
        dicts = dict(dictionaries or {})
        if self.append:
            return Append(tuple(fragments), dictionaries=dicts)
        md = {k.decode(): v for k, v in (self.schema.metadata or {}).items()}
        return Overwrite(tuple(fragments), self.fields, md, data_format=self.data_format, dictionaries=dicts)

    def pending(
        self,
        fragments: Sequence[Fragment],
        written: Sequence[str],
        dictionaries: Mapping[int, pa.Array] | None = None,
        elsewhere: Sequence[tuple[int, str]] = (),
    ) -> Pending:
        """What to commit for ``fragments``, whose ``written`` files (and ``elsewhere``, in other
        base paths) the commit removes if it fails (``dictionaries``: what
        :attr:`FragmentWriter.dictionaries` ended with)."""
        op = self.operation(fragments, dictionaries)
        return Pending(op, self.read_version, written=tuple(written), elsewhere=tuple(elsewhere))


# What pylance's ``data_storage_version`` accepts, and the format each name means (pylance 14).
DATA_STORAGE_VERSIONS = {
    "legacy": "0.1",
    "0.1": "0.1",
    "2.0": "2.0",
    "2.1": "2.1",
    "2.2": "2.2",
    "stable": "2.2",
    "next": "2.3",
}


def resolve_data_storage_version(name: str) -> str:
    """The data file format a ``data_storage_version`` name means (``"stable"`` is 2.2, as in pylance).

    Raises:
        ValueError: a name pylance does not accept either.
    """
    try:
        return DATA_STORAGE_VERSIONS[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"unknown data_storage_version {name!r}; use one of {', '.join(DATA_STORAGE_VERSIONS)}"
        ) from None


def writable_data_format(base: Manifest | None, uri: str, requested: str | None = None) -> str:
    """The format new data files use: ``requested`` (a ``data_storage_version`` name) for a new
    dataset or one being replaced, else the dataset's own; the default for a new dataset.

    Raises:
        ValueError: ``requested`` is not a name pylance accepts.
        UnsupportedFormatError: the version needs writer features, or data files of a format,
            lance_table does not write.
    """
    if base is not None:
        versions.check_writable(base, uri)
    if requested is not None:
        data_format = resolve_data_storage_version(requested)
    elif base is not None:
        fixed = corrected_data_format(base, uri)  # the files' format where pylance 0.16 recorded 0.1
        data_format = fixed[1] if fixed else base.data_storage_version or DEFAULT_DATA_FORMAT[1]
    else:
        data_format = DEFAULT_DATA_FORMAT[1]
    if data_format not in WRITABLE_FORMATS:
        whose = f"{uri} stores data files in" if requested is None else "writing data files in"
        raise UnsupportedFormatError(
            f"{whose} Lance format {data_format}; lance_table writes only format "
            f"{', '.join(WRITABLE_FORMATS)} and never mixes formats in one dataset"
        )
    return data_format


def check_blob_fields(fields: Sequence[LanceField], data_format: str, uri: str) -> None:
    """Refuse blob columns lance_table cannot write: blob v2 columns (``lance.blob.v2``
    extension) inside other fields, or in a dataset whose data files are not format 2.2.

    Raises:
        UnsupportedFormatError: such a field is among ``fields``.
    """
    for f in fields:
        if is_blob_v2(f) and data_format not in BLOB_V2_FORMATS:
            raise UnsupportedFormatError(
                f"{uri}: field {f.name!r} is a blob v2 column, which needs format 2.2 data files, "
                f"not {data_format}"
            )
    blob_write.check_fields(fields, uri)


def plan_write(
    base: Manifest | None,
    mode: WriteMode,
    data_schema: pa.Schema,
    uri: str,
    data_storage_version: str | None = None,
) -> WritePlan:
    """Plan a write of rows of ``data_schema`` on top of ``base`` (the latest version, or None).

    The data file format is the dataset's own for an append (a requested one is ignored there, as
    pylance does), and ``data_storage_version`` (default: the library's) for a new dataset or an
    overwrite that asks for one.

    Raises:
        ValueError: an unknown mode.
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        UnsupportedFormatError: the dataset needs features or a data format lance_table cannot write.
        SchemaError: the schema cannot be stored.
    """
    if mode not in ("create", "append", "overwrite"):
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', not {mode!r}")
    if base is not None and mode == "create":
        raise DatasetAlreadyExistsError(
            f"a dataset already exists at {uri}; use mode='append' or 'overwrite'"
        )
    if base is not None and mode == "append":
        data_format = writable_data_format(base, uri)  # an append keeps the dataset's format
        key = (id(base.fields), data_format)
        hit = _APPEND_PLANS.get(key)
        if (
            hit is not None
            and hit[0] is base.fields
            and hit[1] == base.schema_metadata
            and hit[2].equals(data_schema, check_metadata=True)
        ):
            plan = hit[3]
        else:
            check_blob_fields(base.fields, data_format, uri)
            plan = _append_plan(base, data_format, data_schema, uri)
            # (the fields are kept: their id stays theirs)
            _APPEND_PLANS.put(key, (base.fields, dict(base.schema_metadata), data_schema, plan))
        return replace(plan, read_version=base.version, dictionaries=dict(base.dictionaries))
    data_format = writable_data_format(base, uri, data_storage_version)
    data_schema = blob_write.logical_schema(data_schema, data_format)  # 2.2 blobs: blob v2 structs
    data_schema = storage_schema(data_schema)  # extension types as Lance stores them
    fields = tuple(fields_from_arrow(data_schema))
    build_tree(fields)
    check_blob_fields(fields, data_format, uri)
    return WritePlan(base.version if base is not None else 0, False, data_schema, fields, data_format)


#: the plans of recent appends (see :func:`plan_write`), by the identity of the dataset's fields
#: (a manifest's, shared by its later versions) and the data format: each append of a stream of
#: them would check and project the same schemas again. Kept with the schema metadata and the
#: data's schema they were made for, and taken only for equal ones.
_KeptPlan = tuple[tuple[LanceField, ...], dict[str, bytes], pa.Schema, WritePlan]
_APPEND_PLANS: LRU[tuple[int, str], _KeptPlan] = LRU(16)


def prepare_write(
    base: Manifest | None,
    mode: WriteMode,
    data: Any,
    schema: pa.Schema | None,
    uri: str,
    data_storage_version: str | None = None,
) -> tuple[WritePlan, pa.RecordBatchReader]:
    """The one way from what a user passes to a write to the batches the files store: the data as
    a reader (:func:`~lance_table.table.operations.inputs.coerce_reader`, cast to ``schema``), the
    plan, and the reader's batches conformed to the plan's schema.

    Raises:
        InputTypeError: the data is of no kind a write takes.
        SchemaError: the data does not match the dataset (append) or cannot be stored.
        (and what :func:`plan_write` raises)
    """
    reader = coerce_reader(data, schema)
    plan = plan_write(base, mode, reader.schema, uri, data_storage_version)
    target = plan.schema

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield conform(batch, target)

    return plan, pa.RecordBatchReader.from_batches(target, batches())


def _append_plan(base: Manifest, data_format: str, data_schema: pa.Schema, uri: str) -> WritePlan:
    """An append of rows of ``data_schema``: the dataset's schema, less the nullable fields the data
    lacks (pylance leaves them out of the new files: they read as nulls).

    Raises:
        SchemaError: the data lacks a non-nullable field, or has one the dataset does not, or lacks
            any field of a legacy dataset (whose files hold every field and cannot store nulls of
            most types; pylance refuses such appends too).
    """
    schema = arrow_schema_from_fields(base.fields, base.schema_metadata)
    data_names = set(data_schema.names)
    extra = [n for n in data_schema.names if n not in schema.names]
    missing = missing_fields(data_schema, schema)
    if extra or missing:
        raise AppendSchemaError(
            f"Append with different schema: fields did not match, missing={missing}, "
            f"unexpected={extra} ({uri})"
        )
    fields = base.fields
    if data_names != set(schema.names) or project_present(schema, data_schema) != schema:
        if data_format == LEGACY_FORMAT:
            raise SchemaError(
                f"{uri}: the data lacks fields of this legacy dataset, whose data files must hold "
                f"every field: {[n for n in schema.names if n not in data_names] or 'struct fields'}"
            )
        schema = project_present(schema, data_schema)
        fields = tuple(_present_fields(build_tree(base.fields), list(schema)))
    return WritePlan(base.version, True, schema, fields, data_format, dict(base.dictionaries))


def _present_fields(nodes: Sequence[FieldNode], present: Sequence[pa.Field]) -> Iterator[LanceField]:
    """The Lance fields of ``nodes`` that ``present`` (Arrow fields, struct children projected)
    names, with their ids, in pre-order."""
    by_name = {f.name: f for f in present}
    for node in nodes:
        f = by_name.get(node.name)
        if f is None:
            continue
        if node.field.logical_type == "struct" and pa.types.is_struct(f.type):
            yield node.field
            yield from _present_fields(node.children, list(f.type))
        else:
            yield from (n.field for n in node.walk())
