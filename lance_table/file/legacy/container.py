"""The legacy Lance file container (format "0.1"; its footer says 0.2): footer, metadata, page tables.

Layout (little-endian), read from the end::

    [data pages, batch by batch; within a batch, fields in schema order, depth first]
    [page table]            int64[(max_id - min_id + 1) x num_batches x 2]: (position, length) cells
    [statistics pages]      [statistics page table]          (optional)
    [dictionary values]     one array per dictionary field
    [u32 len][Manifest]     a copy of the schema (``manifest_position``; optional)
    [u32 len][Metadata]     ``lance.file.Metadata``
    [footer, 16 bytes]      i64 metadata_position, i16 major = 0, i16 minor = 2, "LANC"

A page table cell's ``length`` counts values, not bytes (rows; n + 1 for a list offsets page; child
values for a list child). Structs have ``(0, 0)`` cells.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_table._proto import file_pb2, table_pb2
from lance_table.errors import CorruptFileError, SchemaError, UnsupportedFormatError
from lance_table.file.container import FileTail, parse_message
from lance_table.schema import FieldNode, LanceField, build_tree, fields_from_pb
from lance_table.storage.sources import ByteSource

LEGACY_MAGIC = b"LANC"
LEGACY_FOOTER_SIZE = 16
# metadata_position (i64), major (i16), minor (i16), magic
LEGACY_FOOTER_STRUCT = struct.Struct("<qhh4s")
# What the footer of a legacy file says; manifests and pylance call the format "0.1".
LEGACY_FOOTER_VERSION = (0, 2)
LEGACY_FORMAT_VERSION = "0.1"
# Length prefix of the protobuf blocks (Metadata, the in-file Manifest copy).
LEGACY_LENGTH_PREFIX = struct.Struct("<I")
# One page table cell: (position, length), both int64.
PAGE_CELL_SIZE = 16
# How much of the file tail is fetched first (footer, Metadata and usually the Manifest copy).
# Batch offsets are int32 in the format.
MAX_ROWS = 2**31 - 1


@dataclass(frozen=True)
class PageTable:
    """``(position, length)`` of every page: one row per field id ``min_id..``, one column per batch."""

    min_id: int
    cells: np.ndarray  # int64 [num_ids, num_batches, 2]

    @property
    def num_batches(self) -> int:
        return int(self.cells.shape[1])

    def has(self, field_id: int) -> bool:
        return 0 <= field_id - self.min_id < self.cells.shape[0]

    def cell(self, field_id: int, batch: int) -> tuple[int, int]:
        pos, length = self.cells[field_id - self.min_id, batch]
        return int(pos), int(length)


@dataclass(frozen=True)
class StatsInfo:
    """Where the page statistics are: their schema (one struct per data field) and page table."""

    fields: tuple[LanceField, ...]
    field_ids: tuple[int, ...]
    page_table_position: int


@dataclass(frozen=True)
class LegacyMetadata:
    """What the tail of a legacy file says, parsed and validated.

    ``fields`` and ``schema_metadata`` come from the in-file Manifest copy (empty when the file has
    none); ``dictionaries`` maps a dictionary field's id to ``(offset, length)`` of its values.
    """

    path: str
    size: int
    metadata_position: int
    batch_offsets: np.ndarray  # int64, [0, n0, n0 + n1, ...]
    page_table_position: int
    manifest_position: int
    fields: tuple[LanceField, ...] = ()
    schema_metadata: dict[str, bytes] = field(default_factory=dict)
    dictionaries: dict[int, tuple[int, int]] = field(default_factory=dict)
    stats: StatsInfo | None = None

    @property
    def num_batches(self) -> int:
        return max(len(self.batch_offsets) - 1, 0)

    @property
    def num_rows(self) -> int:
        return int(self.batch_offsets[-1]) if len(self.batch_offsets) else 0

    @property
    def has_schema(self) -> bool:
        """Whether the file carries its own copy of the schema."""
        return bool(self.fields)


class _Tail(FileTail):
    def block(self, offset: int, what: str, limit: int) -> memoryview:
        """A ``[u32 len][bytes]`` block that must end at or before ``limit``."""
        (length,) = LEGACY_LENGTH_PREFIX.unpack(self.get(offset, 4, f"length of the {what}", limit))
        return self.get(offset + 4, length, what, limit)


def is_legacy_footer(major: int, minor: int) -> bool:
    """Whether a footer's version marks a legacy file (major 0, minor below 3)."""
    return major == 0 and minor < 3


def read_legacy_metadata(source: ByteSource) -> LegacyMetadata:
    """Read and validate the footer, ``Metadata`` and the in-file Manifest copy of a legacy file.

    Raises:
        CorruptFileError: the bytes are not a well-formed legacy Lance file.
        UnsupportedFormatError: the footer names a version other than the legacy one.
    """
    path = source.name
    tail = _Tail(source)
    size = tail.size
    if size < LEGACY_FOOTER_SIZE:
        raise CorruptFileError(path, f"file of {size} bytes is too small to hold the 16-byte legacy footer")
    meta_pos, major, minor, magic = LEGACY_FOOTER_STRUCT.unpack(
        tail.get(size - LEGACY_FOOTER_SIZE, LEGACY_FOOTER_SIZE, "footer")
    )
    if magic != LEGACY_MAGIC:
        raise CorruptFileError(path, f"wrong magic {magic!r}, expected {LEGACY_MAGIC!r}", offset=size - 4)
    if not is_legacy_footer(major, minor):
        raise UnsupportedFormatError(
            f"footer version {major}.{minor} is not the legacy format (0.1/0.2)", path=path
        )
    meta_end = size - LEGACY_FOOTER_SIZE
    block = tail.block(meta_pos, "metadata", meta_end)
    pb = parse_message(file_pb2.Metadata(), block, path, "metadata", meta_pos)

    offsets = _batch_offsets(list(pb.batch_offsets), path)
    num_batches = max(len(offsets) - 1, 0)
    fields: list[LanceField] = []
    schema_md: dict[str, bytes] = {}
    dicts: dict[int, tuple[int, int]] = {}
    manifest_pos = int(pb.manifest_position)
    if manifest_pos:
        if manifest_pos >= meta_pos:
            raise CorruptFileError(path, "manifest copy lies after the metadata", offset=manifest_pos)
        manifest = parse_message(
            table_pb2.Manifest(), tail.block(manifest_pos, "manifest copy", meta_pos), path,
            "manifest copy", manifest_pos,
        )  # fmt: skip
        fields = fields_from_pb(manifest.fields)
        schema_md = dict(manifest.schema_metadata)
        for pf in manifest.fields:
            if pf.HasField("dictionary"):
                dicts[pf.id] = (int(pf.dictionary.offset), int(pf.dictionary.length))
        try:
            build_tree(fields)
        except SchemaError as exc:
            raise CorruptFileError(path, f"schema in the manifest copy is invalid: {exc}") from exc

    stats = None
    if pb.HasField("statistics"):
        st = pb.statistics
        stats = StatsInfo(
            fields=tuple(fields_from_pb(st.schema)),
            field_ids=tuple(int(i) for i in st.fields),
            page_table_position=int(st.page_table_position),
        )
    page_table_pos = int(pb.page_table_position)
    if num_batches and not 0 <= page_table_pos <= meta_pos:
        raise CorruptFileError(path, "page table lies outside the file", offset=page_table_pos)
    return LegacyMetadata(
        path=path,
        size=size,
        metadata_position=meta_pos,
        batch_offsets=offsets,
        page_table_position=page_table_pos,
        manifest_position=manifest_pos,
        fields=tuple(fields),
        schema_metadata=schema_md,
        dictionaries=dicts,
        stats=stats,
    )


def _batch_offsets(values: list[int], path: str) -> np.ndarray:
    if not values:
        return np.zeros(1, np.int64)
    arr = np.asarray(values, np.int64)
    if arr[0] != 0:
        raise CorruptFileError(path, f"batch offsets start at {int(arr[0])}, not 0")
    if np.any(np.diff(arr) < 0):
        raise CorruptFileError(path, "batch offsets decrease")
    if int(arr[-1]) > MAX_ROWS:
        raise CorruptFileError(path, f"batch offsets claim {int(arr[-1])} rows")
    return arr


def read_page_table(
    source: ByteSource, meta: LegacyMetadata, position: int, ids: Sequence[int], num_batches: int, what: str
) -> PageTable:
    """Load a page table covering field ids ``min(ids)..max(ids)`` and ``num_batches`` batches.

    The table must lie before the metadata; every page's position and length must be non-negative.

    Raises:
        CorruptFileError: the table does not fit the file or holds negative cells.
    """
    path = source.name
    if not ids or not num_batches:
        return PageTable(min(ids, default=0), np.zeros((0, num_batches, 2), np.int64))
    lo, hi = min(ids), max(ids)
    if lo < 0:
        raise CorruptFileError(path, f"{what} covers negative field id {lo}")
    n_cells = (hi - lo + 1) * num_batches
    n_bytes = n_cells * PAGE_CELL_SIZE
    if position < 0 or position + n_bytes > meta.metadata_position:
        raise CorruptFileError(
            path,
            f"{what} of {hi - lo + 1} fields x {num_batches} batches ({n_bytes} bytes) does not fit "
            f"before the metadata at {meta.metadata_position}",
            offset=position,
        )
    raw = source.read_ranges([(position, n_bytes)])[0]
    cells = np.frombuffer(raw, "<i8").reshape(hi - lo + 1, num_batches, 2).astype(np.int64)
    if cells.size and int(cells.min()) < 0:
        raise CorruptFileError(path, f"{what} holds a negative page position or length", offset=position)
    return PageTable(lo, cells)


def arrow_schema(roots: Sequence[FieldNode], metadata: dict[str, bytes]) -> pa.Schema:
    """The Arrow schema of a field tree, with the schema metadata."""
    return pa.schema([n.to_arrow_field() for n in roots], metadata=dict(metadata) or None)
