"""Dictionary encoding: the distinct values of a page and, per value, its index among them; and
pylance's rule for when a dictionary pays.

pylance estimates the encoded size from the cardinality (fixed-width values: 16 bytes per
dictionary entry and 4 bytes per index; variable-width: the average value size plus one offset
per entry and one offset-sized index per value) and dictionary-encodes pages of at least 100
values when that estimate is below 0.8 of the plain size (``lance-encoding:dict-size-ratio``
changes the ratio).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.schema import is_binary_like

# pylance's defaults (LANCE_ENCODING_DICT_TOO_SMALL, LANCE_ENCODING_DICT_SIZE_RATIO)
MIN_VALUES = 100
SIZE_RATIO = 0.8
# pylance's size estimate counts fixed-width dictionary entries at 128 bits and indices at 32 bits
FIXED_ENTRY_BYTES = 16
FIXED_INDEX_BYTES = 4


def _arrow(values: pa.Array | pa.ChunkedArray | np.ndarray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    return pa.array(np.asarray(values))


def encode(
    values: pa.Array | pa.ChunkedArray | np.ndarray,
) -> tuple[pa.Array, np.ndarray]:
    """The distinct values (in order of first appearance) and the ``uint32`` index of each value.

    Floats are told apart by value as Arrow hashes them (all NaNs are one entry; 0.0 and -0.0
    are two). Null values get index 0 and never enter the dictionary: in Lance 2.1+ the
    definition levels say which values are null.
    """
    arr = _arrow(values)
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    encoded = arr.dictionary_encode()
    indices = encoded.indices  # int32 (Arrow's default), null where the value is
    if indices.type != pa.int32():
        if indices.null_count:
            indices = indices.fill_null(0)
        return encoded.dictionary, indices.to_numpy(zero_copy_only=False).astype(np.uint32, copy=False)
    n = len(indices)
    out = np.frombuffer(indices.buffers()[1], np.int32, n, indices.offset * 4).astype(np.uint32)
    if indices.null_count:  # null slots to 0, read off the validity bitmap (no compute kernel)
        bits = np.frombuffer(indices.buffers()[0], np.uint8)
        valid = np.unpackbits(bits, count=indices.offset + n, bitorder="little")[indices.offset :]
        out *= valid
    return encoded.dictionary, out


def cardinality(values: pa.Array | pa.ChunkedArray | np.ndarray) -> int:
    """The number of distinct non-null values (exact: one hash pass in Arrow's C++, which is
    cheaper than pylance's HyperLogLog in Python would be, and never wrong)."""
    arr = _arrow(values)
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    return int(pc.count_distinct(arr, mode="only_valid").as_py())


def _data_size(arr: pa.Array) -> tuple[int, int | None]:
    """Bytes of the values (without offsets or validity) and the offset width of variable ones."""
    t = arr.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        offsets = np.frombuffer(arr.buffers()[1], np.int64, len(arr) + 1, arr.offset * 8)
        return int(offsets[-1] - offsets[0]), 64
    if pa.types.is_binary(t) or pa.types.is_string(t):
        offsets = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4)
        return int(offsets[-1] - offsets[0]), 32
    return len(arr) * t.bit_width // 8, None


def estimated_size(num_values: int, data_size: int, distinct: int, bits_per_offset: int | None) -> int:
    """pylance's estimate of the dictionary-encoded size in bytes (``bits_per_offset`` None for
    fixed-width values, else 32 or 64)."""
    if bits_per_offset is None:
        return distinct * FIXED_ENTRY_BYTES + num_values * FIXED_INDEX_BYTES
    avg = data_size // num_values if num_values else 0
    offset_bytes = bits_per_offset // 8
    return distinct * avg + distinct * offset_bytes + num_values * offset_bytes


def pays(
    values: pa.Array | pa.ChunkedArray | np.ndarray,
    *,
    ratio: float = SIZE_RATIO,
    min_values: int = MIN_VALUES,
    distinct: int | None = None,
) -> bool:
    """Whether pylance's rule would dictionary-encode these values: at least ``min_values`` of
    them, and an estimated encoded size below ``ratio`` of the plain size. Pass ``distinct`` when
    the cardinality is already known.

    Raises:
        ValueError: ``ratio`` is not in (0, 1].
    """
    if not 0 < ratio <= 1:
        raise ValueError(f"dictionary size ratio {ratio} is not in (0, 1]")
    arr = _arrow(values)
    if len(arr) < min_values:
        return False
    if not (
        is_binary_like(arr.type) or pa.types.is_primitive(arr.type) or pa.types.is_fixed_size_binary(arr.type)
    ):
        return False
    data_size, bits_per_offset = _data_size(arr)
    if not data_size:
        return False
    if distinct is None:
        distinct = cardinality(arr)
    return estimated_size(len(arr), data_size, distinct, bits_per_offset) < ratio * data_size
