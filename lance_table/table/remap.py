"""``remap_row_addrs``: row addresses of rows before compactions, mapped to where those rows are
now, by the groups the fragment reuse index records (pylance's ``remap_row_addrs``).

Each recorded compaction lists, per group, the old rows it moved (a roaring treemap of their
addresses, in order) and the new fragments they filled in that order. An address in an old
fragment of a group maps to its row's new address, or to null when the compaction dropped the
row (deleted); any other address stays as it is. Compactions apply oldest first.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_table.errors import CorruptFileError
from lance_table.table.frag_reuse import load_versions
from lance_table.table.indices import FRAG_REUSE_INDEX_NAME, decode_section
from lance_table.table.snapshot import Snapshot


def _treemap(data: bytes, where: str) -> np.ndarray:
    """The sorted addresses of a serialized 64-bit roaring treemap (u64 count, then per bucket
    the u32 high key and a portable bitmap).

    Raises:
        CorruptFileError: the bytes do not parse.
    """
    if not data:
        return np.zeros(0, np.uint64)
    try:
        (count,) = struct.unpack_from("<Q", data, 0)
        pos, parts = 8, []
        for _ in range(count):
            (key,) = struct.unpack_from("<I", data, pos)
            bitmap = BitMap.deserialize(data[pos + 4 :])
            pos += 4 + len(bitmap.serialize())
            low = np.array(bitmap, np.uint64)
            parts.append((np.uint64(key) << np.uint64(32)) | low)
    except (struct.error, ValueError) as exc:
        raise CorruptFileError(where, f"moved row addresses do not parse ({exc})") from None
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _remap_group(addrs: np.ndarray, valid: np.ndarray, group: Any, where: str) -> None:
    old_ids = np.array([f.id for f in group.old_fragments], np.uint64)
    frags = addrs >> np.uint64(32)
    hit = valid & np.isin(frags, old_ids)
    if not hit.any():
        return
    moved = _treemap(group.changed_row_addrs, where)
    rows = np.array([f.physical_rows for f in group.new_fragments], np.int64)
    starts = np.concatenate([[0], np.cumsum(rows)])
    new_ids = np.array([f.id for f in group.new_fragments], np.uint64)
    which = np.flatnonzero(hit)
    pos = np.searchsorted(moved, addrs[which])
    found = (pos < moved.size) & (moved[np.minimum(pos, max(moved.size - 1, 0))] == addrs[which])
    valid[which[~found]] = False
    which, pos = which[found], pos[found]
    frag = np.searchsorted(starts, pos, side="right") - 1
    addrs[which] = (new_ids[frag] << np.uint64(32)) | (pos - starts[frag]).astype(np.uint64)


def remap_row_addrs(snapshot: Snapshot, addrs: Any) -> pa.Array | None:
    """``addrs`` (a uint64 array or integers) mapped through the compactions the fragment reuse
    index records; None when the dataset has no such index.

    Raises:
        CorruptFileError: the index's details do not parse.
    """
    index = next(
        (i for i in decode_section(snapshot.manifest.index_section) if i.name == FRAG_REUSE_INDEX_NAME), None
    )
    if index is None:
        return None
    arr = addrs.combine_chunks() if isinstance(addrs, pa.ChunkedArray) else addrs
    arr = arr if isinstance(arr, pa.Array) else pa.array(list(arr), pa.uint64())
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), bool)
    values = arr.cast(pa.uint64()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.uint64).copy()
    where = f"{snapshot.uri}: {FRAG_REUSE_INDEX_NAME}"
    for version in load_versions(snapshot.storage, index):
        for group in version.groups:
            _remap_group(values, valid, group, where)
    return pa.array(values, pa.uint64(), mask=~valid)
