"""What a write takes as data, and the one place that turns it into batches of the schema the files
store.

:func:`coerce_reader` accepts what pylance 14's writers accept (and objects speaking the Arrow
stream protocol); :func:`conform` makes each batch the plan's: columns in the dataset's order, the
dataset's types, extension types in their stored form, and (appends) nullable columns the data
lacks left out of the files. Streams stay streams: nothing is materialized
that the caller did not hand over materialized.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from lance_table.errors import InputTypeError, SchemaError
from lance_table.extensions import to_storage
from lance_table.table import blob_write


def _module(data: Any) -> str:
    return type(data).__module__ or ""


def _is_pandas(data: Any) -> bool:
    return _module(data).startswith("pandas") and type(data).__name__ == "DataFrame"


def _polars_kind(data: Any) -> str | None:
    if _module(data).startswith("polars") and type(data).__name__ in ("DataFrame", "LazyFrame"):
        return type(data).__name__
    return None


def _is_pydantic_model(item: Any) -> bool:
    """Whether ``item`` is a pydantic model instance (pydantic is imported when it is one)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(item, pydantic.BaseModel)


def is_pydantic_model_class(cls: Any) -> bool:
    """Whether ``cls`` is a pydantic model class (pydantic is imported when it is one)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(cls, type) and issubclass(cls, pydantic.BaseModel)


def _checked_batches(batches: Iterable[Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The items of an iterable of record batches, each cast to ``schema`` (as pylance does)."""
    for batch in batches:
        if isinstance(batch, pa.Table):
            yield from _checked_batches(batch.to_batches(), schema)
            continue
        if not isinstance(batch, pa.RecordBatch):
            raise InputTypeError(f"an iterable of record batches yielded a {type(batch).__name__}")
        yield _cast(batch, schema)


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema == schema:
        return batch
    try:
        return batch.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError, ValueError) as exc:
        raise SchemaError(
            f"a batch of the data does not match the given schema: {exc}\n"
            f"expected:\n{schema}\ngot:\n{batch.schema}"
        ) from exc


def _from_iterable(data: Iterable[Any], schema: pa.Schema | None) -> pa.RecordBatchReader:
    it = iter(data)
    if schema is None:  # pylance needs schema=; lance_table takes the first batch's
        try:
            first = next(it)
        except StopIteration:
            raise ValueError(
                "cannot infer a schema from an empty iterable of batches; pass schema="
            ) from None
        if isinstance(first, pa.Table):
            schema, head = first.schema, first.to_batches()
        elif isinstance(first, pa.RecordBatch):
            schema, head = first.schema, [first]
        else:
            raise InputTypeError(f"an iterable of record batches yielded a {type(first).__name__}")

        def chained() -> Iterator[Any]:
            yield from head
            yield from it

        return pa.RecordBatchReader.from_batches(schema, _checked_batches(chained(), schema))
    return pa.RecordBatchReader.from_batches(schema, _checked_batches(it, schema))


def _native(data: Any, schema: pa.Schema | None) -> pa.RecordBatchReader | None:
    """A reader over an Arrow object, a data frame or a dataset; None for anything else."""
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if _is_pandas(data):  # the index is kept as pylance keeps it (a column, and pandas metadata)
        return pa.Table.from_pandas(data, schema=schema).to_reader()
    polars = _polars_kind(data)
    if polars == "DataFrame":
        return data.to_arrow().to_reader()
    if polars == "LazyFrame":  # streamed: polars collects it batch by batch
        if not hasattr(data, "collect_batches"):
            return data.collect().to_arrow().to_reader()
        frames = iter(data.collect_batches())
        first = next(frames, None)
        if first is None:
            return data.collect().to_arrow().to_reader()
        head = first.to_arrow()

        def rest() -> Iterator[pa.RecordBatch]:
            yield from head.to_batches()
            for frame in frames:
                yield from frame.to_arrow().to_batches()

        return pa.RecordBatchReader.from_batches(head.schema, rest())
    if isinstance(data, dict):
        batch = pa.RecordBatch.from_pydict(data, schema=schema)
        return pa.RecordBatchReader.from_batches(batch.schema, [batch])
    if isinstance(data, list) and data and _is_pydantic_model(data[0]):  # pylance's model rows
        from lance_table.pydantic import model_table

        return model_table(data, schema=schema).to_reader()
    if isinstance(data, list) and data and isinstance(data[0], dict):
        batch = pa.RecordBatch.from_pylist(data, schema=schema)
        return pa.RecordBatchReader.from_batches(batch.schema, [batch])
    if _module(data).startswith("pyarrow._dataset"):
        import pyarrow.dataset as pds

        if isinstance(data, pds.Dataset):
            return pds.Scanner.from_dataset(data).to_reader()
        if isinstance(data, pds.Scanner):
            return data.to_reader()
    return None


def coerce_reader(data: Any, schema: pa.Schema | None = None) -> pa.RecordBatchReader:
    """Turn what a user passes to a write into a RecordBatchReader, cast to ``schema`` if given.

    Takes what pylance 14 takes: a pyarrow Table, RecordBatch, RecordBatchReader, ``pyarrow.dataset``
    Dataset or Scanner, a pandas DataFrame (a named or non-default index kept as a column, with
    pandas' metadata, as pylance keeps it), a Polars DataFrame or LazyFrame, a dict of columns, a list
    of row dicts, a list of pydantic model instances (one class; the model's schema, see
    :mod:`lance_table.pydantic`), an iterable of RecordBatches (cast to ``schema``; without one, the
    first batch's schema is taken, where pylance needs ``schema=``), a lance_table or pylance
    dataset or scanner; and any object with ``__arrow_c_stream__``, ``to_reader()`` or
    ``to_batches()``. Streams are read as they are consumed.

    Unlike pylance, which ignores ``schema=`` for Arrow tables and readers, ``schema`` applies to
    every kind of input: the data is cast to it (columns selected by name).

    Raises:
        InputTypeError: the data is of no kind a write takes (also a TypeError, as in pylance).
        ValueError: an empty iterable without ``schema``.
        SchemaError: (possibly as batches are read) the data cannot be cast to ``schema``.
    """
    reader = _native(data, schema)
    if reader is None:
        if isinstance(data, (str, bytes, bytearray, int, float)) or data is None:
            raise InputTypeError(f"cannot write data of type {type(data).__name__}")
        if hasattr(data, "__arrow_c_stream__"):
            reader = pa.RecordBatchReader.from_stream(data)
        elif callable(getattr(data, "scanner", None)) and hasattr(data, "schema"):  # a dataset
            return coerce_reader(data.scanner(), schema)
        elif callable(getattr(data, "to_reader", None)):  # a scanner
            reader = data.to_reader()
        elif callable(getattr(data, "to_batches", None)) and hasattr(data, "schema"):
            out = getattr(data, "projected_schema", None) or data.schema
            reader = pa.RecordBatchReader.from_batches(out, data.to_batches())
        elif isinstance(data, Iterable):
            return _from_iterable(data, schema)
        else:
            raise InputTypeError(
                f"cannot write data of type {type(data).__name__}: pass a pyarrow Table, RecordBatch, "
                "RecordBatchReader, Dataset or Scanner, a pandas or Polars DataFrame, a dict of columns, "
                "a list of row dicts, or an iterable of RecordBatches with schema="
            )
    if schema is None or reader.schema == schema:
        return reader
    source = reader
    return pa.RecordBatchReader.from_batches(schema, (_cast(b, schema) for b in source))


# -- batches into the stored schema ----------------------------------------------------------------


def missing_fields(
    data: pa.DataType | pa.Schema, target: pa.DataType | pa.Schema, path: str = ""
) -> list[str]:
    """The non-nullable fields of ``target`` (a schema or struct type) that ``data`` lacks, at any
    struct depth (paths with dots); a nullable one that is missing is fine."""
    have = {f.name: f for f in data}
    out = []
    for f in target:
        got = have.get(f.name)
        if got is None:
            if not f.nullable:
                out.append(path + f.name)
        elif pa.types.is_struct(f.type) and pa.types.is_struct(got.type):
            out += missing_fields(got.type, f.type, f"{path}{f.name}.")
    return out


def project_present(target: pa.Schema, data: pa.Schema) -> pa.Schema:
    """The fields of ``target`` that ``data`` has (struct children too), in ``target``'s order."""
    return pa.schema(_present(list(target), list(data)), metadata=target.metadata)


def _present(t_fields: Iterable[pa.Field], d_fields: Iterable[pa.Field]) -> list[pa.Field]:
    """:func:`project_present` of lists of fields (a module function: a nested function calling
    itself is a reference cycle, left to the garbage collector on every write)."""
    have = {f.name: f for f in d_fields}
    out = []
    for f in t_fields:
        got = have.get(f.name)
        if got is None:
            continue
        if pa.types.is_struct(f.type) and pa.types.is_struct(got.type):
            f = f.with_type(pa.struct(_present(list(f.type), list(got.type))))
        out.append(f)
    return out


def _column(col: pa.Array, f: pa.Field, what: str) -> pa.Array:
    """One column of a batch as the stored field ``f`` holds it."""
    if blob_write.is_blob_v2_arrow(f):  # blob bytes (or a blob struct) -> the logical struct
        return blob_write.blob_column(col, f)
    return to_storage(col, f, what)


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the columns of ``target`` (the schema files store) in its order and types.

    Raises:
        SchemaError: a column is missing, extra, of another type, or holds nulls it may not.
    """
    if len(target) and batch.schema.equals(target, check_metadata=True):
        kept, required = _schema_facts(target)
        if kept:
            for i in required:
                col = batch.column(i)
                if col.null_count:
                    raise SchemaError(
                        f"column {target.field(i).name!r} is not nullable but the data holds "
                        f"{col.null_count} nulls"
                    )
            return batch  # (already conformed: every write conforms its batches more than once)
    names = batch.schema.names
    extra = [n for n in names if n not in target.names]
    missing = [n for n in target.names if n not in names]
    if extra or missing:
        raise SchemaError(
            f"data columns {names} do not match the dataset columns {target.names}"
            f" (missing: {missing}, unexpected: {extra})"
        )
    columns = []
    for f in target:
        col = _column(batch.column(names.index(f.name)), f, f.name)
        if col.type != f.type:
            raise SchemaError(f"column {f.name!r} is {col.type} but the dataset stores {f.type}")
        if not f.nullable and col.null_count:
            raise SchemaError(f"column {f.name!r} is not nullable but the data holds {col.null_count} nulls")
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _schema_facts(schema: pa.Schema) -> tuple[bool, tuple[int, ...]]:
    """Whether :func:`conform` keeps batches of ``schema`` as they are (:func:`_kept_as_is`) and
    the positions of its fields that may not be null: the answer for the last schema asked
    about is kept while that schema object lives (a write conforms each batch twice to the same
    schema, and looking over its fields costs some microseconds a field)."""
    last = _last_facts
    if last is not None and last[0]() is schema:
        return last[1]
    facts = (_kept_as_is(schema), tuple(i for i, f in enumerate(schema) if not f.nullable))
    _remember_facts(schema, facts)
    return facts


#: the schema :func:`_schema_facts` last answered for (weakly) and its answer
_last_facts: tuple[weakref.ref[pa.Schema], tuple[bool, tuple[int, ...]]] | None = None


def _remember_facts(schema: pa.Schema, facts: tuple[bool, tuple[int, ...]]) -> None:
    global _last_facts
    _last_facts = (weakref.ref(schema), facts)


def _kept_as_is(schema: pa.Schema) -> bool:
    """Whether :func:`conform` leaves the columns of a batch of exactly this schema as they are:
    no extension arrays to unwrap, no blob v2 columns to build."""
    return not any(isinstance(f.type, pa.BaseExtensionType) or blob_write.is_blob_v2_arrow(f) for f in schema)
