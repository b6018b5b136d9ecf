"""Row ids as scans return them: ``_rowid`` (the stable id of datasets written with stable row
ids, else the address), ``_rowaddr`` (fragment id << 32 | offset in the fragment) and
``_rowoffset`` (the row's position among the version's live rows).

A dataset with stable row ids stores, per fragment, a ``RowIdSequence``: the ids of its physical
rows, in order, as segments (ranges, ranges with holes or a bitmap, arrays of 16-, 32- or 64-bit
values). :func:`decode_sequence` turns one into a numpy array.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lance_table._proto import table_pb2
from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.format.manifest import Fragment, Manifest
from lance_table.format.row_ids import decode_row_ids
from lance_table.table.deletion import search_offsets

ROW_ID = "_rowid"
ROW_ADDR = "_rowaddr"
ROW_OFFSET = "_rowoffset"
#: The system columns a projection may name, in the order pylance appends them.
SYSTEM_COLUMNS = (ROW_ID, ROW_ADDR, ROW_OFFSET)
#: The system columns a filter may name (pylance does not filter on ``_rowoffset``).
FILTERABLE = (ROW_ID, ROW_ADDR)


def addresses(fragment_id: int, positions: np.ndarray) -> np.ndarray:
    """Row addresses of physical ``positions`` in a fragment."""
    return (np.uint64(fragment_id) << np.uint64(32)) | positions.astype(np.uint64)


def decode_sequence(data: bytes, where: str = "row id sequence") -> np.ndarray:
    """The row ids a serialized ``RowIdSequence`` holds, in order (uint64).

    Raises:
        CorruptFileError: the bytes are not a sequence (``where`` names their place).
    """
    return decode_row_ids(data, where)


def fragment_row_ids(fragment: Fragment, where: str) -> np.ndarray | None:
    """The stable row ids of a fragment's physical rows, or None when it has none (row ids are
    then addresses).

    Raises:
        CorruptFileError: the sequence does not parse or its length is not the fragment's rows.
        UnsupportedFormatError: the sequence lives in an external file.
    """
    if not fragment.row_id_meta:
        return None
    pb = table_pb2.DataFragment.FromString(fragment.row_id_meta)
    if pb.WhichOneof("row_id_sequence") == "external_row_ids":
        raise UnsupportedFormatError(f"{where}: fragment {fragment.id} keeps its row ids in an external file")
    if pb.WhichOneof("row_id_sequence") is None:
        return None
    ids = decode_sequence(pb.inline_row_ids, where)
    if ids.size != fragment.physical_rows:
        raise CorruptFileError(
            where, f"fragment {fragment.id} has {fragment.physical_rows} rows but {ids.size} row ids"
        )
    return ids


def offset_bases(manifest: Manifest) -> dict[int, int]:
    """Per fragment id, the ``_rowoffset`` of its first live row (the live rows before it)."""
    counts = np.array([f.num_rows for f in manifest.fragments], np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if counts.size else counts
    return {f.id: int(s) for f, s in zip(manifest.fragments, starts.tolist())}


def row_offsets(base: int, deleted: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``_rowoffset`` of live physical ``positions`` of a fragment whose first live row is ``base``
    (``deleted``: its sorted deleted offsets)."""
    before = search_offsets(deleted, positions) if deleted.size else 0
    return (positions.astype(np.int64) - before + base).astype(np.uint64)


def locate_addresses(fragments: Sequence[Fragment], row_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where rows with these addresses live: (index into ``fragments``, physical offset) per
    address, -1 for addresses outside every fragment."""
    frag_ids = (row_ids >> np.uint64(32)).astype(np.int64)
    offsets = (row_ids & np.uint64(0xFFFFFFFF)).astype(np.int64)
    known = np.array([f.id for f in fragments], np.int64)
    if not known.size:
        return np.full(row_ids.size, -1), np.full(row_ids.size, -1)
    order = np.argsort(known, kind="stable")
    at = np.minimum(np.searchsorted(known[order], frag_ids), known.size - 1)
    which = np.where(known[order][at] == frag_ids, order[at], -1)
    rows = np.array([f.physical_rows for f in fragments], np.int64)
    inside = (which >= 0) & (offsets < rows[np.maximum(which, 0)])
    return np.where(inside, which, -1), np.where(inside, offsets, -1)


def locate_ids(
    live: Sequence[tuple[np.ndarray, np.ndarray]], row_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where rows with these stable ids live: (index into ``live``, physical offset) per id, -1
    for ids of no live row (``live``: per fragment, the stable ids of its live rows and their
    physical offsets)."""
    ids = np.concatenate([i for i, _ in live]) if live else np.zeros(0, np.uint64)
    if not ids.size:
        return np.full(row_ids.size, -1), np.full(row_ids.size, -1)
    owner = np.repeat(np.arange(len(live)), [i.size for i, _ in live])
    local = np.concatenate([p for _, p in live]).astype(np.int64)
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids[order], row_ids), ids.size - 1)
    pick = order[at]
    found = ids[pick] == row_ids
    return np.where(found, owner[pick], -1), np.where(found, local[pick], -1)
