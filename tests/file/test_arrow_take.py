"""``file.arrow_take``: takes and filters of slices of fixed-size lists of fixed-size lists (which
pyarrow 26 takes from the wrong place) give the rows a copy of the slice gives, in every container."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table.file.arrow_take import filter_rows, sliced, take, unsliced


def _matrices(rows: int, offset: int = 0) -> pa.FixedSizeListArray:
    flat = pa.array(np.arange(offset, offset + rows * 6, dtype=np.float32))
    return pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(flat, 2), 3)


class _Matrix(pa.ExtensionType):
    """An extension type stored as fixed-size lists of fixed-size lists."""

    def __init__(self) -> None:
        super().__init__(pa.list_(pa.list_(pa.float32(), 2), 3), "test.matrix")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> _Matrix:
        return cls()


def _slices() -> list[pa.Array]:
    whole = _matrices(20)
    pairs = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(60.0)), 2)
    inner = pa.FixedSizeListArray.from_arrays(pairs.slice(3), 3)
    return [
        whole.slice(5, 10),  # the array itself sliced
        inner,  # only its child sliced
        pa.StructArray.from_arrays([whole, pa.array(range(20))], ["m", "i"]).slice(3, 12),
        pa.StructArray.from_arrays([whole.slice(2, 12)], ["m"]),  # a struct over a sliced child
        pa.FixedSizeListArray.from_arrays(whole, 2).slice(1, 6),  # three levels
        pa.ExtensionArray.from_storage(_Matrix(), whole).slice(4, 9),  # an extension type's storage
    ]


def test_takes_and_filters_of_slices_give_the_slices_rows() -> None:
    for part in _slices():
        expected = part.to_pylist()
        idx = [len(part) - 1, 0, 2, 2]
        mask = pa.array([i % 3 != 1 for i in range(len(part))])
        want_taken = [expected[i] for i in idx]
        want_kept = [row for row, keep in zip(expected, mask.to_pylist()) if keep]
        assert take(part, pa.array(idx)).to_pylist() == want_taken, part.type
        assert filter_rows(part, mask).to_pylist() == want_kept, part.type
        chunked = pa.chunked_array([part, part])
        assert take(chunked, pa.array(idx)).to_pylist() == want_taken
        batch = pa.record_batch([part, pa.array(range(len(part)))], ["v", "n"])
        table = pa.Table.from_batches([batch])
        assert take(batch, pa.array(idx)).column(0).to_pylist() == want_taken
        assert filter_rows(table, mask).column(0).to_pylist() == want_kept
        assert take(table, pa.array(idx)).column(1).to_pylist() == idx


def test_other_arrays_are_not_copied() -> None:
    plain = pa.array(np.arange(10)).slice(3)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(20.0)), 2).slice(3)
    whole = _matrices(4)
    for arr in (plain, vectors, whole):
        assert unsliced(arr) is arr
    assert sliced(whole, 1, 2).offset == 0 and sliced(whole, 1, 2).to_pylist() == whole.to_pylist()[1:3]
    table = pa.table({"x": plain})
    assert take(table, pa.array([0])).column(0).to_pylist() == [3]
