"""The Lance v2 file container: footer, offset tables, column metadata and the file descriptor.

Layout (little-endian)::

    [page buffers, each starting at a multiple of 64, padded with 0x48]
    [global buffers]                 global buffer 0 = FileDescriptor (schema + row count)
    [column metadata 0..C-1]         ColumnMetadata protobufs
    [CMO table]                      C x (u64 position, u64 size)
    [GBO table]                      G x (u64 position, u64 size)
    [footer, 40 bytes]               u64 column_meta_start, u64 cmo_table_start, u64 gbo_table_start,
                                     u32 num_global_buffers, u32 num_columns, u16 major, u16 minor, "LANC"
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pyarrow as pa

from lance_table._lru import LRU
from lance_table._parallel import cached_per_instance
from lance_table._proto import encodings_v2_0_pb2, encodings_v2_1_pb2, file_pb2
from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file.column_list import MAX_COUNT, ColumnList, parse_message
from lance_table.file.v2_1.blob_v2 import attach_descriptor_fields, descriptor_problem
from lance_table.schema import FieldNode, LanceField, build_tree, fields_from_pb
from lance_table.storage.sources import ByteSource

MAGIC = b"LANC"
FOOTER_SIZE = 40
FOOTER_STRUCT = struct.Struct("<QQQIIHH")
PAGE_ALIGNMENT = 64
PADDING_BYTE = b"\x48"
# How much of the file tail the reader fetches first; more is fetched only when metadata is larger.
TAIL_READ_SIZE = 64 * 1024
# Row and value counts must fit a signed 64-bit integer (numpy positions, Arrow lengths).

URL_COLUMN_ENCODING = "/lance.encodings.ColumnEncoding"
URL_ARRAY_ENCODING = "/lance.encodings.ArrayEncoding"
URL_PAGE_LAYOUT = "/lance.encodings21.PageLayout"


class FileVersion(Enum):
    """Versions of the v2 file format, with the (major, minor) their footers carry.

    Example:
        ```python
        from lance_table.file import FileVersion

        assert FileVersion.parse("stable") is FileVersion.parse("2.2")
        print(FileVersion.parse("2.1").footer)  # (2, 1)
        ```
    """

    V2_0 = "2.0"
    V2_1 = "2.1"
    V2_2 = "2.2"

    @property
    def footer(self) -> tuple[int, int]:
        """The (major, minor) version a file of this format records in its footer."""
        return {"2.0": (0, 3), "2.1": (2, 1), "2.2": (2, 2)}[self.value]

    @property
    def manifest_version(self) -> tuple[int, int]:
        """The (major, minor) a manifest's DataFile records for files of this version."""
        return {"2.0": (2, 0), "2.1": (2, 1), "2.2": (2, 2)}[self.value]

    @classmethod
    def from_footer(cls, major: int, minor: int, path: str) -> FileVersion:
        """The format of a file whose footer records ``major.minor`` (an error naming ``path`` if unknown)."""
        if (major, minor) in ((0, 3), (2, 0)):
            return cls.V2_0
        if (major, minor) == (2, 1):
            return cls.V2_1
        if (major, minor) == (2, 2):
            return cls.V2_2
        if (major, minor) == (0, 1) or (major, minor) == (0, 2):
            raise UnsupportedFormatError(
                "legacy Lance v1 data files (format 0.1) are not supported", path=path
            )
        raise UnsupportedFormatError(f"unknown Lance file format version {major}.{minor}", path=path)

    @classmethod
    def parse(cls, text: str) -> FileVersion:
        """The format a user names (``"2.0"``, ``"2.1"``, ``"2.2"`` or ``"stable"``)."""
        aliases = {"stable": "2.2", "2.0": "2.0", "2.1": "2.1", "2.2": "2.2"}
        try:
            return cls(aliases[text])
        except KeyError:
            raise UnsupportedFormatError(f"Lance file format version {text!r} is not supported") from None


@dataclass(frozen=True)
class FileMetadata:
    """Everything the footer region of a Lance file says, parsed and validated.

    Example:
        ```python
        from lance_table.file import write_table
        from lance_table.file.reader import LanceFileReader as FileReader

        write_table(f"{tmp}/fm.lance", table)
        meta = FileReader(f"{tmp}/fm.lance").metadata
        print(meta.version, meta.num_rows, [f.name for f in meta.fields])
        ```
    """

    path: str
    size: int
    version: FileVersion
    num_rows: int
    fields: tuple[LanceField, ...]
    schema_metadata: dict[str, bytes]
    columns: ColumnList  # file2_pb2.ColumnMetadata, each parsed on first use
    global_buffers: tuple[tuple[int, int], ...]
    # The values of each column: its page lengths added up (each below MAX_COUNT).
    column_values: Sequence[int] = ()
    #: the bytes of the column metadata and of the file descriptor (what the parsed messages hold)
    metadata_bytes: int = 0
    #: each column's first page's buffers as ``(file offset, size)`` pairs (read while checking
    #: them: reads of small files, of one page per column, need no other); empty when not known
    first_buffers: Sequence[tuple[tuple[int, int], ...]] = ()

    @cached_per_instance
    def roots(self) -> list[FieldNode]:
        """The field tree (built once: a scan of many fragments asks each file for it)."""
        return build_tree(self.fields)

    @cached_per_instance
    def roots_by_id(self) -> dict[int, FieldNode]:
        """The top-level fields by field id."""
        return {n.id: n for n in self.roots}

    @cached_per_instance
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema (the same object for the files of a dataset: see :data:`_SCHEMAS`)."""
        key = (id(self.fields), tuple(self.schema_metadata.items()))
        hit = _SCHEMAS.get(key)
        if hit is not None and hit[0] is self.fields:
            return hit[1]
        md = dict(self.schema_metadata) or None
        schema = pa.schema([n.to_arrow_field() for n in self.roots], metadata=md)
        _SCHEMAS.put(key, (self.fields, schema))  # (the fields are kept: their id stays theirs)
        return schema


#: Arrow schemas of files, by the identity of their (shared, immutable) fields and their schema
#: metadata: the files of a dataset share them (see ``_FILE_FIELDS``)
_SCHEMAS: LRU[tuple[Any, ...], tuple[tuple[LanceField, ...], pa.Schema]] = LRU(64)


class FileTail:
    """The bytes at the end of a file (read once); ranges before them are fetched on demand."""

    def __init__(self, source: ByteSource) -> None:
        self.source = source
        self.size = source.size()
        self.start = max(0, self.size - TAIL_READ_SIZE)
        self.data = source.read_ranges([(self.start, self.size - self.start)])[0] if self.size else b""

    def get(self, offset: int, length: int, what: str, limit: int | None = None) -> memoryview:
        """``length`` bytes at ``offset``, which must lie before ``limit`` (default: the file's end).

        Raises:
            CorruptFileError: the range lies outside.
        """
        end = self.size if limit is None else limit
        if offset < 0 or length < 0 or offset + length > end:
            where = f"the file of {self.size} bytes" if limit is None else f"[0, {end})"
            raise CorruptFileError(
                self.source.name, f"{what} [{offset}, {offset + length}) lies outside {where}", offset=offset
            )
        if offset < self.start:
            return self.source.read_ranges([(offset, length)])[0]
        return memoryview(self.data)[offset - self.start : offset - self.start + length]


#: the fields of the file schemas read last, by the schema's bytes: the files of a dataset share
#: theirs, and the same (immutable) fields give the same field tree, built once (see build_tree)
#: (at most 64 schemas, and 16 MiB of their bytes: a schema of thousands of fields is large)
_FILE_FIELDS: LRU[bytes, tuple[LanceField, ...]] = LRU(64, max_bytes=16 << 20)


def read_metadata(source: ByteSource) -> FileMetadata:
    """Read and validate the footer, offset tables, column metadata and schema of a Lance v2 file.

    Raises:
        CorruptFileError: the bytes are not a well-formed Lance v2 file.
        UnsupportedFormatError: the file is a Lance version this library does not read.
    """
    path = source.name
    tail = FileTail(source)
    size = tail.size
    if size < FOOTER_SIZE:
        raise CorruptFileError(path, f"file of {size} bytes is too small to hold the 40-byte Lance footer")
    footer = tail.get(size - FOOTER_SIZE, FOOTER_SIZE, "footer")
    if bytes(footer[-4:]) != MAGIC:
        raise CorruptFileError(
            path, f"wrong magic {bytes(footer[-4:])!r}, expected {MAGIC!r}", offset=size - 4
        )
    cm_start, cmo_start, gbo_start, n_global, n_cols, major, minor = FOOTER_STRUCT.unpack_from(footer, 0)
    version = FileVersion.from_footer(major, minor, path)
    meta_end = size - FOOTER_SIZE
    if n_cols * 16 > meta_end or n_global * 16 > meta_end:
        raise CorruptFileError(
            path, f"footer claims {n_cols} columns and {n_global} global buffers", offset=meta_end
        )
    if not cm_start <= meta_end or cmo_start + n_cols * 16 > meta_end or gbo_start + n_global * 16 > meta_end:
        raise CorruptFileError(path, "footer offsets point beyond the metadata region", offset=meta_end)
    if n_global < 1:
        raise CorruptFileError(path, "file has no global buffer 0 (file descriptor)", offset=meta_end)

    cmo = _table(tail.get(cmo_start, n_cols * 16, "column metadata offset table"), n_cols)
    gbo = _table(tail.get(gbo_start, n_global * 16, "global buffer offset table"), n_global)
    for pos, length in (*cmo, *gbo):
        if pos + length > meta_end:
            raise CorruptFileError(
                path, f"metadata block [{pos}, {pos + length}) lies beyond the footer", offset=pos
            )

    gb0_pos, gb0_len = gbo[0]
    raw = bytes(tail.get(gb0_pos, gb0_len, "file descriptor"))
    known = _DESCRIPTORS.get(raw)  # the files of a dataset of one row count share theirs
    if known is None:
        known = _descriptor(raw, path, gb0_pos)
        _DESCRIPTORS.put(raw, known, len(raw))
    num_rows, fields, schema_metadata = known
    columns = ColumnList(*_column_blobs(tail, cmo), path, meta_end)
    meta = FileMetadata(
        path=path,
        size=size,
        version=version,
        num_rows=num_rows,
        fields=fields,
        schema_metadata=dict(schema_metadata),
        columns=columns,
        global_buffers=tuple(gbo),
        column_values=columns.values,
        metadata_bytes=sum(length for _, length in cmo) + gb0_len,
        first_buffers=columns.first_buffers,
    )
    try:
        meta.roots  # noqa: B018 - validates the schema early
    except Exception as exc:
        raise CorruptFileError(path, f"schema in the file descriptor is invalid: {exc}") from exc
    return meta


def _descriptor(raw: bytes, path: str, at: int) -> tuple[int, tuple[LanceField, ...], dict[str, bytes]]:
    """The row count, fields and schema metadata of a file descriptor's bytes (at ``at``).

    Raises:
        CorruptFileError: the descriptor does not parse, or its row count or schema is invalid.
    """
    descriptor = parse_message(file_pb2.FileDescriptor(), raw, path, "file descriptor", at)
    if descriptor.length > MAX_COUNT:
        raise CorruptFileError(path, f"file descriptor claims {descriptor.length} rows", offset=at)
    schema_bytes = descriptor.schema.SerializeToString()
    fields = _FILE_FIELDS.get(schema_bytes)
    if fields is None:
        fields = tuple(attach_descriptor_fields(fields_from_pb(descriptor.schema.fields)))
        problem = descriptor_problem(fields)
        if problem is not None:
            raise CorruptFileError(path, f"schema in the file descriptor is invalid: {problem}", offset=at)
        _FILE_FIELDS.put(schema_bytes, fields, len(schema_bytes))
    return int(descriptor.length), fields, dict(descriptor.schema.metadata)


#: what file descriptors say (row count, fields, schema metadata), by their bytes: the files of
#: a living table (the same schema and, mostly, row count in each) repeat theirs
_DESCRIPTORS: LRU[bytes, tuple[int, tuple[LanceField, ...], dict[str, bytes]]] = LRU(256, max_bytes=16 << 20)


def _column_blobs(tail: FileTail, cmo: list[tuple[int, int]]) -> tuple[bytes, list[tuple[int, int, int]]]:
    """The bytes of the columns' metadata, and each column's ``(file offset, start in those
    bytes, length)``: one copy of the region that holds them when it lies in the tail (the tail
    itself, up to 64 KiB, is not kept), else each read on its own and joined."""
    if not cmo:
        return b"", []
    lo = min(pos for pos, _ in cmo)
    hi = max(pos + length for pos, length in cmo)
    if lo < tail.start:
        blobs = [bytes(tail.get(pos, length, f"column {i} metadata")) for i, (pos, length) in enumerate(cmo)]
        starts = itertools.accumulate((len(b) for b in blobs[:-1]), initial=0)
        return b"".join(blobs), [(pos, start, length) for (pos, length), start in zip(cmo, starts)]
    region = bytes(tail.get(lo, hi - lo, "column metadata"))
    return region, [(pos, pos - lo, length) for pos, length in cmo]


def _table(data: memoryview, n: int) -> list[tuple[int, int]]:
    vals = struct.unpack_from(f"<{2 * n}Q", data, 0)
    return [(vals[2 * i], vals[2 * i + 1]) for i in range(n)]


def unpack_encoding(enc: Any, source: ByteSource, what: str) -> tuple[str | None, Any]:
    """Unwrap a ``file2.Encoding`` into its type URL and decoded message.

    Returns ``(None, None)`` when the encoding is absent.

    Raises:
        CorruptFileError: the wrapped bytes do not parse.
        UnsupportedFormatError: the type URL is unknown.
    """
    which = enc.WhichOneof("location")
    if which is None or which == "none":
        return None, None
    if which == "direct":
        direct: bytes = enc.direct.encoding
        found = _ENCODINGS.get(direct)
        if found is not None:
            return found
        raw: bytes | memoryview = direct
    else:
        raw = source.read_ranges([(enc.indirect.buffer_location, enc.indirect.buffer_length)])[0]
    from google.protobuf import any_pb2

    wrapper = parse_message(any_pb2.Any(), raw, source.name, what, 0)
    cls = {
        URL_ARRAY_ENCODING: encodings_v2_0_pb2.ArrayEncoding,
        URL_COLUMN_ENCODING: encodings_v2_0_pb2.ColumnEncoding,
        URL_PAGE_LAYOUT: encodings_v2_1_pb2.PageLayout,
    }.get(wrapper.type_url)
    if cls is None:
        raise UnsupportedFormatError(
            f"{what} uses unknown encoding type {wrapper.type_url!r}", path=source.name
        )
    found = wrapper.type_url, parse_message(cls(), wrapper.value, source.name, what, 0)
    if which == "direct":
        _ENCODINGS.put(bytes(raw), found)
    return found


#: encodings read last, by their bytes (the same page encodings recur in every file of a dataset);
#: the messages are shared, and only ever read
_ENCODINGS: LRU[bytes, tuple[str, Any]] = LRU(4096)


def pack_encoding(msg: Any, type_url: str, target: Any) -> None:
    """Wrap an encoding message into ``target`` (a ``file2.Encoding``) as a direct encoding."""
    target.direct.encoding = any_bytes(type_url, msg.SerializeToString())


def any_bytes(type_url: str, value: bytes) -> bytes:
    """A serialized ``google.protobuf.Any`` of ``type_url`` and ``value``: the bytes protobuf
    writes for it (field 1, then field 2; either left out when empty), built without making the
    message, which every page of a file would pay for."""
    url = type_url.encode()
    out = b"\x0a" + _varint(len(url)) + url if url else b""
    return out + b"\x12" + _varint(len(value)) + value if value else out


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
