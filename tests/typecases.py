"""Arrow tables covering every type the 2.0 codec stores, shared by round-trip and interop tests."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa


def _md(key: str, value: str) -> dict[str, str]:
    return {key: value}


def type_cases(n: int = 50, seed: int = 0) -> dict[str, pa.Table]:
    """One small table per type, each with nulls where 2.0 can store them."""
    rng = np.random.default_rng(seed)
    null = rng.random(n) < 0.3

    def arr(values: object, t: pa.DataType, nulls: bool = True) -> pa.Array:
        mask = null if nulls else None
        if pa.types.is_temporal(t):
            base = pa.int32() if t.bit_width == 32 else pa.int64()
            return pa.array(values, base, mask=mask).view(t)
        return pa.array(values, t, mask=mask)

    ints = rng.integers(-100, 100, n)
    cases: dict[str, pa.Array] = {
        "bool": arr(rng.random(n) < 0.5, pa.bool_()),
        "int8": arr(ints, pa.int8()),
        "int16": arr(ints, pa.int16()),
        "int32": arr(ints, pa.int32()),
        "int64": arr(ints * 10**12, pa.int64()),
        "uint8": arr(np.abs(ints), pa.uint8()),
        "uint16": arr(np.abs(ints), pa.uint16()),
        "uint32": arr(np.abs(ints), pa.uint32()),
        "uint64": arr(np.abs(ints).astype(np.uint64) * np.uint64(2**50), pa.uint64()),
        "float16": arr(rng.random(n).astype(np.float16), pa.float16()),
        "float32": arr(rng.random(n).astype(np.float32), pa.float32()),
        "float64": arr(rng.random(n), pa.float64()),
        "date32": arr(ints, pa.date32()),
        "date64": arr(ints * 86_400_000, pa.date64()),
        "time32s": arr(np.abs(ints), pa.time32("s")),
        "time32ms": arr(np.abs(ints), pa.time32("ms")),
        "time64us": arr(np.abs(ints), pa.time64("us")),
        "time64ns": arr(np.abs(ints), pa.time64("ns")),
        "duration": arr(ints, pa.duration("ms")),
        "decimal128": arr([decimal.Decimal(int(i)) / 100 for i in ints], pa.decimal128(12, 2)),
        "decimal256": arr([decimal.Decimal(int(i)) / 1000 for i in ints], pa.decimal256(45, 3)),
        "fixed_size_binary": arr([bytes([i % 256] * 3) for i in range(n)], pa.binary(3)),
        "string": arr([f"s{i}" * (i % 4) for i in range(n)], pa.string()),
        "large_string": arr([f"ls{i}" for i in range(n)], pa.large_string()),
        "binary": arr([bytes(range(i % 7)) for i in range(n)], pa.binary()),
        "large_binary": arr([bytes(range(i % 5)) for i in range(n)], pa.large_binary()),
        "fsl_float": pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(n * 4).astype(np.float32)), 4, mask=pa.array(null)
        ),
        "fsl_fsl": pa.array(
            [None if null[i] else [[i, i + 1], [i + 2, i + 3]] for i in range(n)],
            pa.list_(pa.list_(pa.int32(), 2), 2),
        ),
        "list_int": arr([list(range(i % 4)) for i in range(n)], pa.list_(pa.int64())),
        "large_list": arr([[float(i)] * (i % 3) for i in range(n)], pa.large_list(pa.float64())),
        "list_struct": arr(
            [[{"a": i, "b": f"x{i}"}] * (i % 3) for i in range(n)],
            pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ),
        "list_list": arr(
            [[[i] * (i % 2), None if i % 5 == 0 else [i, i]] for i in range(n)],
            pa.list_(pa.list_(pa.int16())),
        ),
        "struct": pa.StructArray.from_arrays(
            [arr(ints, pa.int32()), arr([f"v{i}" for i in range(n)], pa.string())], names=["x", "y"]
        ),
        "dictionary": pa.array(
            [None if null[i] else ["red", "green", "blue"][i % 3] for i in range(n)]
        ).dictionary_encode(),
        "timestamp_s": arr(ints * 1000, pa.timestamp("s")),
        "timestamp_ms_utc": arr(ints * 1000, pa.timestamp("ms", "UTC")),
        "timestamp_us_tz": arr(ints * 1000, pa.timestamp("us", "Europe/Paris")),
        "timestamp_ns": arr(ints * 1000, pa.timestamp("ns")),
        "all_null": pa.nulls(n, pa.int32()),
        "null_type": pa.nulls(n),
    }
    out = {name: pa.table({name: a}) for name, a in cases.items()}
    out["field_metadata"] = pa.table(
        [pa.array(range(n), pa.int64())],
        schema=pa.schema(
            [pa.field("m", pa.int64(), False, metadata={"unit": "m", "k": "v"})], metadata={"s": "1"}
        ),
    )
    out["date_literal"] = pa.table({"d": pa.array([datetime.date(2024, 1, 1)] * n)})
    return out


def compression_cases(n: int = 3000, seed: int = 1) -> dict[str, pa.Table]:
    """Tables whose field metadata makes pylance's 2.0 writer pick special encodings."""
    rng = np.random.default_rng(seed)
    words = np.array(["apple", "banana", "cherry", None], dtype=object)

    def one(name: str, values: pa.Array, **md: str) -> pa.Table:
        return pa.table([values], schema=pa.schema([pa.field(name, values.type, metadata=md or None)]))

    text = pa.array([f"some text value {i} \xff" if i % 5 else None for i in range(n)])
    return {
        "auto_dictionary": one("s", pa.array(words[rng.integers(0, 4, n)])),
        "zstd_string": one("s", text, **{"lance-encoding:compression": "zstd"}),
        "lz4_string": one("s", text, **{"lance-encoding:compression": "lz4"}),
        "zstd_int": one("x", pa.array(np.arange(n)), **{"lance-encoding:compression": "zstd"}),
        "fsst_string": one("s", text, **{"lance-encoding:compression": "fsst"}),
        "packed_struct": one(
            "p",
            pa.StructArray.from_arrays(
                [pa.array(np.arange(n, dtype=np.int32)), pa.array(rng.random(n))], names=["a", "b"]
            ),
            packed="true",
        ),
        "blob": one(
            "b",
            pa.array([b"x" * (i % 300) if i % 7 else None for i in range(200)], pa.large_binary()),
            **{"lance-encoding:blob": "true"},
        ),
    }
