"""``lance_table.arrow``: bfloat16 values and arrays as pylance's ``lance.arrow`` makes them (the same
bits, printing and casts), and bfloat16 columns (plain, in fixed-size lists, in tensors, in lists
and structs) written by either library and read by the other."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.arrow as pylance_arrow
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table import arrow as lt_arrow

pytestmark = pytest.mark.interop

_VALUES = [
    1.1,
    None,
    3.4,
    -0.0,
    1e-3,
    65504.0,
    1e30,
    1e40,
    -1e40,
    float("inf"),
    float("nan"),
    1.00390625,
    2.0,
]


def _bits(arr: pa.Array) -> list[bytes | None]:
    return arr.storage.to_pylist()


def test_arrays_have_pylances_bits_and_text() -> None:
    ours = lt_arrow.bfloat16_array(_VALUES)
    theirs = pylance_arrow.bfloat16_array(_VALUES)
    assert _bits(ours) == _bits(theirs)
    assert [str(v) for v in ours] == [str(v) for v in theirs]
    assert str(ours) == str(theirs)
    assert repr(ours).split("\n", 1)[1] == repr(theirs).split("\n", 1)[1]
    long = [float(i) / 8 for i in range(30)]
    assert str(lt_arrow.bfloat16_array(long)) == str(pylance_arrow.bfloat16_array(long))
    # where two shortest decimals are equally near, the last digit may differ; the value does not
    sevenths = [float(i) / 7 for i in range(30)]
    ours_text = [np.float32(str(v)) for v in lt_arrow.bfloat16_array(sevenths)]
    assert ours_text == [np.float32(str(v)) for v in pylance_arrow.bfloat16_array(sevenths)]
    for v in (1.124565, 0.1, -2.5, 3.0):
        assert str(lt_arrow.BFloat16(v)) == str(pylance_arrow.BFloat16(v))
        assert lt_arrow.BFloat16(v).as_float() == pylance_arrow.BFloat16(v).as_float()
    assert lt_arrow.BFloat16(1.1) > lt_arrow.BFloat16(1.0)
    assert lt_arrow.BFloat16(1.0) != 1.0
    assert ours[0] == lt_arrow.BFloat16(1.1) and ours[1].as_py() is None
    with pytest.raises(TypeError):
        lt_arrow.bfloat16_array(["x"])


def test_cast_between_floats_and_bfloat16() -> None:
    for dtype in (np.float16, np.float32, np.float64):
        floats = pa.array(np.array([1.0, 2.5, 3.0, 4.0], dtype=dtype))
        ours = lt_arrow.cast(floats, "bfloat16")
        assert _bits(ours) == _bits(pylance_arrow.bfloat16_array(floats.to_pylist()))
        assert lt_arrow.cast(ours, floats.type).equals(floats)
        fsl = pa.FixedSizeListArray.from_arrays(floats, 2)
        bf16_fsl = lt_arrow.cast(fsl, pa.list_(lt_arrow.BFloat16Type(), 2))
        assert _bits(bf16_fsl.values) == _bits(ours)
        assert lt_arrow.cast(bf16_fsl, fsl.type).equals(fsl)
    with_nulls = lt_arrow.cast(pa.array([1.0, None]), "bf16")
    assert with_nulls.to_pylist() == [lt_arrow.BFloat16(1.0), None]
    assert lt_arrow.cast(with_nulls, pa.float32()).to_pylist() == [1.0, None]
    with pytest.raises(ValueError):
        lt_arrow.cast(pa.array(["a"]), "bfloat16")
    with pytest.raises(ValueError):
        lt_arrow.cast(with_nulls, pa.string())
    assert lt_arrow.cast(pa.array([1, 2]), pa.int8()).type == pa.int8()


def test_numpy_and_pandas() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arr = lt_arrow.bfloat16_array([1.1, 2.1, 3.4])
    np.testing.assert_array_equal(arr.to_numpy(), np.array([1.1, 2.1, 3.4], dtype=ml_dtypes.bfloat16))
    assert lt_arrow.BFloat16Array.from_numpy(arr.to_numpy()) == arr
    series = lt_arrow.bfloat16_array([1.5, None]).to_pandas()
    assert series[0] == lt_arrow.BFloat16(1.5) and series[1] is None
    assert pa.array(series).storage.equals(lt_arrow.bfloat16_array([1.5, None]).storage)


def _table(make) -> pa.Table:
    values = make([float(i) / 3 for i in range(12)] + [None] * 0)
    vectors = pa.FixedSizeListArray.from_arrays(values, 3)
    tensors = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(values.type, [3]), vectors)
    four = values.slice(0, 4)
    return pa.table(
        {
            "value": make([1.5, None, -2.0, 0.1]),
            "vector": vectors,
            "tensor": tensors,
            "list": pa.ListArray.from_arrays(pa.array([0, 1, 1, 3, 4]), four),
            "struct": pa.StructArray.from_arrays([four], ["b"]),
        }
    )


def _as_bits(table: pa.Table) -> list:
    """The table's values with every bfloat16 as its 2 bytes (so the two libraries' types compare)."""
    out = []
    for col in table.columns:
        arr = col.combine_chunks()
        if isinstance(arr.type, pa.FixedShapeTensorType):
            arr = arr.storage
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        elif pa.types.is_fixed_size_list(arr.type) or pa.types.is_list(arr.type):
            inner = arr.values.storage if isinstance(arr.values, pa.ExtensionArray) else arr.values
            arr = inner
        elif pa.types.is_struct(arr.type):
            arr = arr.field(0).storage
        out.append(arr.to_pylist())
    return out


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_columns_cross_between_the_libraries(tmp_path: Path, writer: str) -> None:
    data = _table(lt_arrow.bfloat16_array if writer == "ours" else pylance_arrow.bfloat16_array)
    (lt if writer == "ours" else lance).write_dataset(data, tmp_path)
    ours, theirs = lt.dataset(tmp_path).to_table(), lance.dataset(tmp_path).to_table()
    assert _as_bits(ours) == _as_bits(theirs) == _as_bits(data)
    assert [str(f.type) for f in ours.schema] == [str(f.type) for f in theirs.schema]
    assert [str(f.type) for f in ours.schema] == [str(f.type) for f in data.schema]
    assert lt.dataset(tmp_path).lance_schema.to_pyarrow() == lance.dataset(tmp_path).lance_schema.to_pyarrow()
