"""Type mapping between Arrow/Lance and Spark.

Reads map every Arrow type of a dataset to the Spark type that holds its values exactly (unsigned
integers widen, nanosecond timestamps become microseconds, dictionaries decode); batches are then
cast to the Arrow schema Spark expects. Writes take Spark's Arrow batches and cast them to the
dataset's schema. Types with no counterpart raise :class:`SchemaError` naming the column.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_table.errors import SchemaError


def spark_type(t: pa.DataType, where: str) -> Any:
    """The Spark type for an Arrow type.

    Raises:
        SchemaError: the type has no Spark equivalent.
    """
    from pyspark.sql import types as T

    if pa.types.is_dictionary(t):
        return spark_type(t.value_type, where)
    simple = {
        pa.bool_(): T.BooleanType(),
        pa.int8(): T.ByteType(),
        pa.int16(): T.ShortType(),
        pa.int32(): T.IntegerType(),
        pa.int64(): T.LongType(),
        pa.uint8(): T.ShortType(),
        pa.uint16(): T.IntegerType(),
        pa.uint32(): T.LongType(),
        pa.float16(): T.FloatType(),
        pa.float32(): T.FloatType(),
        pa.float64(): T.DoubleType(),
        pa.string(): T.StringType(),
        pa.large_string(): T.StringType(),
        pa.binary(): T.BinaryType(),
        pa.large_binary(): T.BinaryType(),
        pa.date32(): T.DateType(),
        pa.date64(): T.DateType(),
        pa.null(): T.NullType(),
    }
    if t in simple:
        return simple[t]
    if pa.types.is_uint64(t):
        return T.DecimalType(20, 0)
    if pa.types.is_fixed_size_binary(t):
        return T.BinaryType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_duration(t):
        return T.DayTimeIntervalType()
    if pa.types.is_time(t):
        return T.TimeType(6)
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"column {where}: {t} has more than the 38 digits Spark decimals hold")
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return T.ArrayType(spark_type(t.value_type, where), t.value_field.nullable)
    if pa.types.is_struct(t):
        return T.StructType([spark_field(f, f"{where}.{f.name}") for f in t])
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type, where), spark_type(t.item_type, where), t.item_field.nullable)
    raise SchemaError(f"column {where}: Arrow type {t} has no Spark equivalent")


def spark_field(f: pa.Field, where: str | None = None) -> Any:
    from pyspark.sql import types as T

    return T.StructField(f.name, spark_type(f.type, where or f.name), f.nullable)


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark StructType of a dataset schema."""
    from pyspark.sql import types as T

    return T.StructType([spark_field(f) for f in schema])


def spark_arrow_schema(struct: Any) -> pa.Schema:
    """The Arrow schema Spark expects from a Python data source reading ``struct``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct, timezone="UTC")


def cast_batch(batch: pa.RecordBatch, target: pa.Schema, where: str) -> pa.RecordBatch:
    """``batch`` cast column by column to ``target`` (names matched, order from ``target``).

    Raises:
        SchemaError: a column is missing or cannot be cast.
    """
    columns = []
    for f in target:
        idx = batch.schema.get_field_index(f.name)
        if idx < 0:
            raise SchemaError(f"{where}: column {f.name!r} is missing")
        col = batch.column(idx)
        if pa.types.is_dictionary(col.type) and not pa.types.is_dictionary(f.type):
            col = col.dictionary_decode()
        if col.type != f.type:
            # Time values lose sub-microsecond digits on their way to Spark: that is Spark's precision.
            safe = not (pa.types.is_temporal(col.type) and pa.types.is_temporal(f.type))
            try:
                col = col.cast(f.type, safe=safe)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(
                    f"{where}: column {f.name!r} of type {col.type} cannot become {f.type}: {exc}"
                ) from exc
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=target)
