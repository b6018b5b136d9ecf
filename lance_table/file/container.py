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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from operator import add
from typing import Any, TypeVar

import pyarrow as pa

from lance_table._lru import LRU
from lance_table._parallel import cached_per_instance
from lance_table._proto import encodings_v2_0_pb2, encodings_v2_1_pb2, file_pb2
from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file.column_list import MAX_COUNT, ColumnList, parse_message
from lance_table.file.v2_1.blob_v2 import attach_descriptor_fields, descriptor_problem
from lance_table.schema import FieldNode, LanceField, build_tree, fields_from_pb
from lance_table.storage.sources import ByteSource, BytesSource

MAGIC = b"LANC"
FOOTER_SIZE = 40
FOOTER_STRUCT = struct.Struct("<QQQIIHH")
PAGE_ALIGNMENT = 64
PADDING_BYTE = b"\x48"
# How much of the file tail the reader fetches first; more is fetched only when metadata is larger.
TAIL_READ_SIZE = 64 * 1024
# Row and value counts must fit a signed 64-bit integer (numpy positions, Arrow lengths).

_T = TypeVar("_T")

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


#: the format of each (major, minor) a footer may record (see FileVersion.from_footer)
_FOOTER_VERSIONS = {
    (0, 3): FileVersion.V2_0,
    (2, 0): FileVersion.V2_0,
    (2, 1): FileVersion.V2_1,
    (2, 2): FileVersion.V2_2,
}


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
    #: what the file descriptor says, shared with the files whose descriptors are the same bytes
    #: (None: a file metadata made by hand, whose schema facts are made for it alone)
    described: Descriptor | None = field(default=None, repr=False, compare=False)

    @cached_per_instance
    def roots(self) -> list[FieldNode]:
        """The field tree (built once: a scan of many fragments asks each file for it)."""
        if self.described is not None:
            return list(self.described.roots)
        return build_tree(self.fields)

    @cached_per_instance
    def roots_by_id(self) -> dict[int, FieldNode]:
        """The top-level fields by field id (shared by the files of one descriptor: only read)."""
        if self.described is not None:
            return self.described.roots_by_id
        return {n.id: n for n in self.roots}

    @cached_per_instance
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema (the same object for the files of a dataset: see :data:`_SCHEMAS`)."""
        if self.described is not None:
            return self.described.arrow_schema
        return _arrow_schema(self.fields, self.schema_metadata, self.roots)


def _arrow_schema(
    fields: tuple[LanceField, ...], metadata: dict[str, bytes], roots: Sequence[FieldNode]
) -> pa.Schema:
    key = (id(fields), tuple(metadata.items()))
    hit = _SCHEMAS.get(key)
    if hit is not None and hit[0] is fields:
        return hit[1]
    schema = pa.schema([n.to_arrow_field() for n in roots], metadata=dict(metadata) or None)
    _SCHEMAS.put(key, (fields, schema))  # (the fields are kept: their id stays theirs)
    return schema


#: Arrow schemas of files, by the identity of their (shared, immutable) fields and their schema
#: metadata: the files of a dataset share them (see ``_FILE_FIELDS``)
_SCHEMAS: LRU[tuple[Any, ...], tuple[tuple[LanceField, ...], pa.Schema]] = LRU(64)


class Descriptor:
    """What a file descriptor (global buffer 0) says: the row count, fields and schema metadata,
    with the field tree and what readers derive from it. The files of a living table repeat one
    descriptor (the same schema, mostly the same row count): it is parsed and checked once for
    all of them (see :data:`_DESCRIPTORS`), and each file's metadata shares it. Only read."""

    __slots__ = ("_arrow", "_derived", "fields", "num_rows", "roots", "roots_by_id", "schema_metadata")

    def __init__(
        self, num_rows: int, fields: tuple[LanceField, ...], schema_metadata: dict[str, bytes]
    ) -> None:
        self.num_rows = num_rows
        self.fields = fields
        self.schema_metadata = schema_metadata
        self.roots: tuple[FieldNode, ...] = tuple(build_tree(fields))
        self.roots_by_id = {n.id: n for n in self.roots}
        self._arrow: pa.Schema | None = None
        self._derived: dict[str, Any] = {}

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the fields, with the schema metadata."""
        schema = self._arrow
        if schema is None:
            schema = self._arrow = _arrow_schema(self.fields, self.schema_metadata, self.roots)
        return schema

    def derived(self, key: str, make: Callable[[], _T]) -> _T:
        """What ``make`` derives from these fields alone (a reader's columns of its leaves),
        made on the first ask of ``key`` and shared by every file of this descriptor."""
        try:
            return self._derived[key]
        except KeyError:
            pass
        found = self._derived[key] = make()
        return found


class FileTail:
    """The bytes at the end of a file (read once); ranges before them are fetched on demand."""

    def __init__(self, source: ByteSource) -> None:
        self.source = source
        self.size = size = source.size()
        self.start = start = max(0, size - TAIL_READ_SIZE)
        if not size:
            self.data: bytes | memoryview = b""
        elif not start and isinstance(source, BytesSource):  # a small file, read whole already
            self.data = source.data
        else:
            self.data = source.read_ranges([(start, size - start)])[0]

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
    if footer[-4:] != MAGIC:
        raise CorruptFileError(
            path, f"wrong magic {bytes(footer[-4:])!r}, expected {MAGIC!r}", offset=size - 4
        )
    cm_start, cmo_start, gbo_start, n_global, n_cols, major, minor = FOOTER_STRUCT.unpack_from(footer, 0)
    version = _FOOTER_VERSIONS.get((major, minor)) or FileVersion.from_footer(major, minor, path)
    meta_end = size - FOOTER_SIZE
    if n_cols * 16 > meta_end or n_global * 16 > meta_end:
        raise CorruptFileError(
            path, f"footer claims {n_cols} columns and {n_global} global buffers", offset=meta_end
        )
    if not cm_start <= meta_end or cmo_start + n_cols * 16 > meta_end or gbo_start + n_global * 16 > meta_end:
        raise CorruptFileError(path, "footer offsets point beyond the metadata region", offset=meta_end)
    if n_global < 1:
        raise CorruptFileError(path, "file has no global buffer 0 (file descriptor)", offset=meta_end)

    # (each table as one flat tuple: position, size, position, size, ...)
    cmo = struct.unpack_from(
        f"<{2 * n_cols}Q", tail.get(cmo_start, n_cols * 16, "column metadata offset table")
    )
    gbo = struct.unpack_from(
        f"<{2 * n_global}Q", tail.get(gbo_start, n_global * 16, "global buffer offset table")
    )
    blocks = cmo + gbo
    if max(map(add, blocks[0::2], blocks[1::2])) > meta_end:
        pos, length = next((p, n) for p, n in zip(blocks[0::2], blocks[1::2]) if p + n > meta_end)
        raise CorruptFileError(
            path, f"metadata block [{pos}, {pos + length}) lies beyond the footer", offset=pos
        )

    gb0_pos, gb0_len = gbo[0], gbo[1]
    raw = bytes(tail.get(gb0_pos, gb0_len, "file descriptor"))
    described = _DESCRIPTORS.get(raw)  # the files of a dataset of one row count share theirs
    if described is None:
        described = _descriptor(raw, path, gb0_pos)
        _DESCRIPTORS.put(raw, described, len(raw))
    columns = ColumnList(*_column_blobs(tail, cmo), path, meta_end)
    # (made without the frozen dataclass's __init__, which sets each field through a call: this
    # runs for every file a scan opens)
    meta = _new(FileMetadata)
    meta.__dict__.update(
        path=path,
        size=size,
        version=version,
        num_rows=described.num_rows,
        fields=described.fields,
        schema_metadata=dict(described.schema_metadata),
        columns=columns,
        global_buffers=tuple(zip(gbo[0::2], gbo[1::2])),
        column_values=columns.values,
        metadata_bytes=sum(cmo[1::2]) + gb0_len,
        first_buffers=columns.first_buffers,
        described=described,
    )
    return meta


_new = object.__new__


def _descriptor(raw: bytes, path: str, at: int) -> Descriptor:
    """What a file descriptor's bytes (at ``at``) say: its row count, fields and schema metadata.

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
    try:
        return Descriptor(int(descriptor.length), fields, dict(descriptor.schema.metadata))
    except Exception as exc:
        raise CorruptFileError(path, f"schema in the file descriptor is invalid: {exc}") from exc


#: what file descriptors say (row count, fields, schema metadata, field tree), by their bytes: the
#: files of a living table (the same schema and, mostly, row count in each) repeat theirs
_DESCRIPTORS: LRU[bytes, Descriptor] = LRU(256, max_bytes=16 << 20)


def _column_blobs(
    tail: FileTail, cmo: tuple[int, ...]
) -> tuple[bytes, tuple[int, ...], int | tuple[int, ...]]:
    """The bytes of the columns' metadata (``cmo``: each column's file offset and length, one
    after another), ``cmo``, and where each column starts in those bytes (see
    :class:`ColumnList`): one copy of the region that holds them when it lies in the tail (the
    tail itself, up to 64 KiB, is not kept), else each read on its own and joined."""
    if not cmo:
        return b"", cmo, 0
    positions, lengths = cmo[0::2], cmo[1::2]
    lo = min(positions)
    if lo < tail.start:
        blobs = [
            bytes(tail.get(p, n, f"column {i} metadata")) for i, (p, n) in enumerate(zip(positions, lengths))
        ]
        return b"".join(blobs), cmo, tuple(itertools.accumulate(lengths[:-1], initial=0))
    hi = max(map(add, positions, lengths))
    return bytes(tail.get(lo, hi - lo, "column metadata")), cmo, lo


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
