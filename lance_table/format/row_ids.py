"""Stable row ids: a fragment's row id sequence and its row version sequences (``rowids.proto``),
decoded to numpy arrays and encoded as pylance encodes them (ranges where the ids run on, arrays
where they do not).

A fragment of a dataset with stable row ids stores, inline in its ``DataFragment``, the row id of
each physical row (``inline_row_ids``, a serialized ``RowIdSequence``) and the dataset versions
that created and last updated each row (``RowDatasetVersionSequence`` runs).
"""

from __future__ import annotations

import numpy as np

from lance_table._proto import rowids_pb2, table_pb2
from lance_table.errors import CorruptFileError, UnsupportedFormatError

# A run of consecutive ids longer than this becomes a Range segment of its own.
MIN_RANGE = 8


def _decode_array(pb: rowids_pb2.EncodedU64Array) -> np.ndarray:
    kind = pb.WhichOneof("array")
    if kind == "u16_array":
        return np.frombuffer(pb.u16_array.offsets, "<u2").astype(np.uint64) + np.uint64(pb.u16_array.base)
    if kind == "u32_array":
        return np.frombuffer(pb.u32_array.offsets, "<u4").astype(np.uint64) + np.uint64(pb.u32_array.base)
    if kind == "u64_array":
        return np.frombuffer(pb.u64_array.values, "<u8").astype(np.uint64)
    return np.zeros(0, np.uint64)


def _decode_segment(seg: rowids_pb2.U64Segment, where: str) -> np.ndarray:
    kind = seg.WhichOneof("segment")
    if kind == "range":
        return np.arange(seg.range.start, seg.range.end, dtype=np.uint64)
    if kind == "range_with_holes":
        r = seg.range_with_holes
        ids = np.arange(r.start, r.end, dtype=np.uint64)
        return np.setdiff1d(ids, _decode_array(r.holes), assume_unique=True)
    if kind == "range_with_bitmap":
        r = seg.range_with_bitmap
        n = r.end - r.start
        bits = np.unpackbits(np.frombuffer(r.bitmap, np.uint8), bitorder="little")
        if bits.size < n:
            raise CorruptFileError(where, f"a row id bitmap holds {bits.size} bits for {n} ids")
        return np.arange(r.start, r.end, dtype=np.uint64)[bits[:n].astype(bool)]
    if kind in ("sorted_array", "array"):
        return _decode_array(getattr(seg, kind))
    raise CorruptFileError(where, f"a row id segment of unknown kind {kind!r}")


def _encode_segments(values: np.ndarray, out: object) -> None:
    """Append segments holding ``values`` (in order) to a repeated ``U64Segment`` field."""
    values = np.asarray(values, np.uint64)
    if values.size == 0:
        return
    breaks = np.flatnonzero(np.diff(values.astype(np.int64)) != 1) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [values.size]])
    pending: list[np.ndarray] = []

    def flush() -> None:
        if pending:
            arr = np.concatenate(pending)
            seg = out.add()  # type: ignore[attr-defined]
            target = seg.sorted_array if np.all(np.diff(arr.astype(np.int64)) > 0) else seg.array
            target.u64_array.values = arr.astype("<u8").tobytes()
            pending.clear()

    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        if b - a >= MIN_RANGE or (a == 0 and b == values.size):
            flush()
            seg = out.add()  # type: ignore[attr-defined]
            seg.range.start = int(values[a])
            seg.range.end = int(values[b - 1]) + 1
        else:
            pending.append(values[a:b])
    flush()


def decode_row_ids(data: bytes, where: str) -> np.ndarray:
    """The row ids of a serialized ``RowIdSequence``.

    Raises:
        CorruptFileError: the bytes do not parse.
    """
    pb = rowids_pb2.RowIdSequence()
    try:
        pb.ParseFromString(data)
    except Exception as exc:
        raise CorruptFileError(where, f"row id sequence does not parse ({exc})") from exc
    parts = [_decode_segment(s, where) for s in pb.segments]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def encode_row_ids(ids: np.ndarray) -> bytes:
    pb = rowids_pb2.RowIdSequence()
    _encode_segments(ids, pb.segments)
    return pb.SerializeToString()


def decode_versions(data: bytes, where: str) -> np.ndarray:
    """The version of each row of a serialized ``RowDatasetVersionSequence``."""
    pb = rowids_pb2.RowDatasetVersionSequence()
    try:
        pb.ParseFromString(data)
    except Exception as exc:
        raise CorruptFileError(where, f"row version sequence does not parse ({exc})") from exc
    parts = [np.full(_decode_segment(r.span, where).size, r.version, np.uint64) for r in pb.runs]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def encode_versions(versions: np.ndarray) -> bytes:
    """Runs of equal versions, each spanning its row positions (as pylance writes them)."""
    pb = rowids_pb2.RowDatasetVersionSequence()
    versions = np.asarray(versions, np.uint64)
    if versions.size:
        breaks = np.flatnonzero(np.diff(versions.astype(np.int64)) != 0) + 1
        starts = np.concatenate([[0], breaks])
        ends = np.concatenate([breaks, [versions.size]])
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            run = pb.runs.add()
            run.span.range.start, run.span.range.end = a, b
            run.version = int(versions[a])
    return pb.SerializeToString()


class RowMeta:
    """The row id and row version sequences of one fragment, decoded from its ``row_id_meta``
    (the serialized ``DataFragment`` holding only them)."""

    def __init__(self, row_id_meta: bytes, where: str) -> None:
        pb = table_pb2.DataFragment.FromString(row_id_meta) if row_id_meta else table_pb2.DataFragment()
        for name in ("external_row_ids", "external_created_at_versions", "external_last_updated_at_versions"):
            if pb.HasField(name):
                raise UnsupportedFormatError(
                    f"{where}: row ids or versions in external files are not supported"
                )
        self.ids = decode_row_ids(pb.inline_row_ids, where) if pb.HasField("inline_row_ids") else None
        self.created = self._versions(pb, "inline_created_at_versions", where)
        self.updated = self._versions(pb, "inline_last_updated_at_versions", where)

    @staticmethod
    def _versions(pb: table_pb2.DataFragment, name: str, where: str) -> np.ndarray | None:
        return decode_versions(getattr(pb, name), where) if pb.HasField(name) else None


def row_id_meta(ids: np.ndarray, created: np.ndarray | None, updated: np.ndarray | None) -> bytes:
    """A fragment's ``row_id_meta``: the row ids and, when given, the row version sequences."""
    pb = table_pb2.DataFragment()
    pb.inline_row_ids = encode_row_ids(ids)
    if created is not None:
        pb.inline_created_at_versions = encode_versions(created)
    if updated is not None:
        pb.inline_last_updated_at_versions = encode_versions(updated)
    return pb.SerializeToString()
