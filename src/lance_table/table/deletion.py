"""Deletion vectors: the offsets of deleted rows in a fragment, stored as Arrow IPC or roaring bitmaps."""

from __future__ import annotations

import io
import secrets

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from pyroaring import BitMap

from lance_table.errors import CorruptFileError
from lance_table.format import paths
from lance_table.format.manifest import DELETION_ARROW, DELETION_BITMAP, DeletionFile, Fragment
from lance_table.storage import Storage

# pylance's threshold: fresh deletions of at least this many rows start as a bitmap, and an Arrow
# set turns into a bitmap once it holds more than this many rows. A bitmap stays a bitmap.
BITMAP_THRESHOLD = 5000
ARROW_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])


def deletion_path(fragment_id: int, df: DeletionFile) -> str:
    return paths.deletion_file_path(fragment_id, df.read_version, df.id, df.kind == DELETION_BITMAP)


def read_deletions(storage: Storage, fragment: Fragment) -> np.ndarray:
    """Sorted unique deleted offsets of a fragment (empty when it has no deletion file).

    Raises:
        CorruptFileError: the deletion file cannot be decoded or points past the fragment.
    """
    df = fragment.deletion_file
    if df is None:
        return np.zeros(0, np.uint32)
    path = deletion_path(fragment.id, df)
    data = storage.read(path)
    where = f"{storage.uri.rstrip('/')}/{path}"
    if df.kind == DELETION_BITMAP:
        try:
            offsets = np.asarray(BitMap.deserialize(data).to_array(), np.uint32)
        except Exception as exc:
            raise CorruptFileError(where, f"roaring bitmap does not decode ({exc})") from exc
    else:
        offsets = _read_arrow(data, where)
    if offsets.size and int(offsets[-1]) >= fragment.physical_rows:
        raise CorruptFileError(where, f"deleted offset {int(offsets[-1])} >= {fragment.physical_rows} rows")
    return offsets


def _read_arrow(data: bytes, where: str) -> np.ndarray:
    try:
        table = ipc.open_file(pa.BufferReader(data)).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptFileError(where, f"Arrow deletion file does not decode ({exc})") from exc
    if not table.schema.equals(ARROW_SCHEMA):
        raise CorruptFileError(
            where, f"deletion file schema is {table.schema}, expected row_id: uint32 not null"
        )
    column = table.column(0)
    if column.null_count:
        raise CorruptFileError(where, "deletion file holds nulls")
    # pylance writes offsets in hash-set order: never assume they are sorted
    return sorted_unique(column.to_numpy())


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted, duplicate-free copy (sort-based: faster than hashing for row offsets)."""
    out = np.sort(np.asarray(values, np.uint32))
    if out.size > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted union of two offset arrays."""
    return sorted_unique(np.concatenate([np.asarray(a, np.uint32), np.asarray(b, np.uint32)]))


def choose_kind(previous: DeletionFile | None, total: int) -> str:
    """Arrow or bitmap for a new cumulative deletion file, following pylance's rules."""
    if previous is None:
        return DELETION_BITMAP if total >= BITMAP_THRESHOLD else DELETION_ARROW
    if previous.kind == DELETION_BITMAP:
        return DELETION_BITMAP
    return DELETION_BITMAP if total > BITMAP_THRESHOLD else DELETION_ARROW


def encode_deletions(offsets: np.ndarray, kind: str) -> bytes:
    """The bytes of a deletion file holding ``offsets``."""
    values = np.asarray(offsets, np.uint32)
    if kind == DELETION_BITMAP:
        bitmap = BitMap()
        bitmap.update(values)
        return bitmap.serialize()
    sink = io.BytesIO()
    options = ipc.IpcWriteOptions(compression="zstd")
    with ipc.new_file(sink, ARROW_SCHEMA, options=options) as writer:
        writer.write_table(pa.table([pa.array(values, pa.uint32())], schema=ARROW_SCHEMA))
    return sink.getvalue()


def write_deletions(
    storage: Storage, fragment: Fragment, offsets: np.ndarray, read_version: int
) -> DeletionFile:
    """Write a new cumulative deletion file for ``fragment`` and return its descriptor."""
    kind = choose_kind(fragment.deletion_file, int(offsets.size))
    df = DeletionFile(
        kind=kind, read_version=read_version, id=secrets.randbits(64), num_deleted_rows=int(offsets.size)
    )
    storage.write(deletion_path(fragment.id, df), encode_deletions(offsets, kind))
    return df
