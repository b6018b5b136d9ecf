"""Small pylance helpers about rows and storage: :class:`RowIdSequence` (a fragment's stable row
ids, stored inline in its metadata), :func:`serialize_row_addrs` (row addresses as pylance's
serialized roaring treemap) and :class:`StorageOptionsAccessor` (a dataset's static storage
options, pylance's ``storage_options_accessor``)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._numpy import sorted_unique
from lance_table.errors import FragmentMetadataError, RowIdOverflowError
from lance_table.format.row_ids import decode_row_ids, encode_row_ids
from lance_table.table.fragment_metadata import RowIdMeta

# pylance's default of the refresh offset of storage options from a provider, in seconds
DEFAULT_REFRESH_OFFSET_SECS = 60
# the most values a roaring array container holds (more: a bitmap container)
ARRAY_CONTAINER_MAX = 4096


def _u64(values: Any, what: str) -> np.ndarray:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if values.null_count:
            raise FragmentMetadataError(f"{what} must not be null")
        values = values.to_numpy(zero_copy_only=False)
    elif isinstance(values, range) and values.step == 1:
        values = np.arange(values.start, max(values.start, values.stop), dtype=np.int64)
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values))
    if arr.size and arr.dtype.kind not in "iu":
        raise FragmentMetadataError(f"{what} must be integers, not {arr.dtype}")
    if arr.size and arr.dtype.kind == "i" and int(arr.min()) < 0:
        raise RowIdOverflowError(f"{what} must be non-negative (u64): {int(arr.min())}")
    return arr.astype(np.uint64)


class RowIdSequence:
    """The stable row ids of a fragment's rows, in row order (pylance's
    ``lance.fragment.RowIdSequence``): built from a ``range``, a pyarrow array or integers, and
    stored inline in a fragment's metadata with :meth:`to_inline_metadata`.

    Raises:
        FragmentMetadataError: an id appears twice, or a value is null or not an integer (a
            ValueError, as pylance raises).
        RowIdOverflowError: a negative id (an OverflowError, as pylance raises).

    Example:
        ```python
        from lance_table.fragment import RowIdSequence

        meta = RowIdSequence([7, 12]).to_inline_metadata()
        print(list(RowIdSequence.from_inline_metadata(meta)))
        ```
    """

    def __init__(self, row_ids: range | pa.Array | pa.ChunkedArray | Iterable[int]) -> None:
        ids = _u64(row_ids, "row ids")
        if ids.size > 1 and sorted_unique(ids).size != ids.size:
            values, counts = np.unique(ids, return_counts=True)
            raise FragmentMetadataError(
                f"Row ids must be unique, but row id {int(values[counts > 1][0])} appears more than once "
                f"in the sequence of {ids.size} row ids"
            )
        self._ids = ids

    @staticmethod
    def from_inline_metadata(metadata: RowIdMeta) -> RowIdSequence:
        """The sequence stored in ``metadata`` (inline row ids).

        Raises:
            CorruptFileError: the bytes are not a row id sequence.
        """
        return RowIdSequence(decode_row_ids(metadata.inline, "inline row id metadata"))

    def to_inline_metadata(self) -> RowIdMeta:
        """The sequence as inline row id metadata (for ``FragmentMetadata(row_id_meta=...)``)."""
        return RowIdMeta(encode_row_ids(self._ids))

    def to_pyarrow(self) -> pa.UInt64Array:
        """The ids as a ``uint64`` array, in order."""
        return pa.array(self._ids, pa.uint64())

    def __len__(self) -> int:
        return int(self._ids.size)

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids.tolist())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowIdSequence) and np.array_equal(self._ids, other._ids)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (RowIdSequence, (self._ids.tolist(),))

    def __repr__(self) -> str:
        return f"RowIdSequence({self._ids.tolist()})"


def serialize_row_addrs(addrs: Iterable[int]) -> bytes:
    """Row addresses as pylance's serialized roaring treemap (pylance's ``serialize_row_addrs``,
    the form of its scanners' ``row_addr_allowlist`` / ``row_addr_blocklist``): the number of
    bitmaps, then for each high 32 bits the key, the byte length and the portable roaring bitmap
    of the low 32 bits (little-endian u32s).

    Raises:
        RowIdOverflowError: a negative address.
        FragmentMetadataError: a value that is not an integer.

    Example:
        ```python
        from lance_table import serialize_row_addrs

        print(serialize_row_addrs([0, 2, 4]).hex())
        ```
    """
    values = sorted_unique(_u64(addrs, "row addresses"))
    high = (values >> np.uint64(32)).astype(np.uint32)
    keys, starts = np.unique(high, return_index=True)
    bounds = [*starts.tolist(), values.size]
    out = [struct.pack("<I", keys.size)]
    for i, key in enumerate(keys.tolist()):
        low = (values[bounds[i] : bounds[i + 1]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        body = _portable_bitmap(low)
        out.append(struct.pack("<II", key, len(body)) + body)
    return b"".join(out)


def _portable_bitmap(values: np.ndarray) -> bytes:
    """Sorted unique u32 ``values`` as a portable roaring bitmap without run containers (the
    form pylance writes: arrays up to 4096 values, bitmaps above)."""
    keys = (values >> np.uint32(16)).astype(np.uint16)
    uniq, starts = np.unique(keys, return_index=True)
    bounds = [*starts.tolist(), values.size]
    header = [struct.pack("<II", 12346, uniq.size)]
    descriptive, bodies = [], []
    for i, key in enumerate(uniq.tolist()):
        low = (values[bounds[i] : bounds[i + 1]] & np.uint32(0xFFFF)).astype(np.uint16)
        descriptive.append(struct.pack("<HH", key, low.size - 1))
        if low.size <= ARRAY_CONTAINER_MAX:
            bodies.append(low.astype("<u2").tobytes())
        else:
            bits = np.zeros(65536, np.uint8)
            bits[low] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
    offset = 8 + 4 * uniq.size + 4 * uniq.size
    offsets = []
    for body in bodies:
        offsets.append(struct.pack("<I", offset))
        offset += len(body)
    return b"".join(header + descriptive + offsets + bodies)


class StorageOptionsAccessor:
    """A dataset's storage options, as pylance's ``storage_options_accessor`` hands them out
    (static options; lance_table has no credential provider to refresh them from).

    Example:
        ```python
        accessor = lt.dataset(uri, storage_options={"timeout": "30s"}).storage_options_accessor
        print(accessor.get_storage_options())
        ```
    """

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)

    @staticmethod
    def with_static_options(options: Mapping[str, Any]) -> StorageOptionsAccessor:
        """An accessor of the fixed ``options``."""
        return StorageOptionsAccessor(options)

    def accessor_id(self) -> str:
        """An id of these options (``static_options_<hash>``, as pylance names static ones)."""
        digest = hashlib.sha256(repr(sorted(self._options.items())).encode()).hexdigest()[:16]
        return f"static_options_{digest}"

    def has_provider(self) -> bool:
        """Whether a provider refreshes the options: never in lance_table."""
        return False

    def refresh_offset_secs(self) -> int:
        """How long before expiry a provider's options are refreshed (pylance's default)."""
        return DEFAULT_REFRESH_OFFSET_SECS

    def get_storage_options(self) -> dict[str, Any]:
        """The options (a copy)."""
        return dict(self._options)

    def initial_storage_options(self) -> dict[str, Any]:
        """The options the dataset was opened with (a copy)."""
        return dict(self._options)

    def __repr__(self) -> str:
        return f"StorageOptionsAccessor(id={self.accessor_id()}, has_provider=false)"
