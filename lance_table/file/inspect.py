"""The structure of a Lance data file: footer, schema, columns, pages and their encodings.

:func:`summarize` gives a summary (what ``lance-table inspect FILE`` shows); :func:`describe` a full
dump of the metadata. Usage: ``python -m lance_table.file.inspect FILE [--pages N]``
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf import text_format

from lance_table.errors import LanceFileNotFoundError
from lance_table.file.container import MAGIC, read_metadata, unpack_encoding
from lance_table.file.legacy.container import arrow_schema, is_legacy_footer, read_legacy_metadata
from lance_table.schema import build_tree
from lance_table.storage import open_storage
from lance_table.storage.sources import ByteSource, open_source
from lance_table.storage.uris import local_path

# The last 8 bytes of every Lance file, legacy or v2: the format's (major, minor) and the magic.
_TAIL = struct.Struct("<HH4s")
# Encoding messages that only wrap another: left out of an encoding's summary.
_WRAPPERS = frozenset({"ArrayEncoding", "CompressiveEncoding", "Buffer", "ColumnEncoding"})


@dataclass(frozen=True)
class ColumnSummary:
    """One physical column of a v2 file: its pages, values, bytes on disk and page encodings.

    Attributes:
        index: the column's position in the file.
        pages: how many pages it has.
        values: the values its pages hold (rows, or list items for a list's items column).
        bytes: the bytes of its page and column buffers.
        encodings: the distinct encodings of its pages, each summarized as the outer layout and
            the encodings inside it (``"MiniBlockLayout(InlineBitpacking)"``), in page order.
    """

    index: int
    pages: int
    values: int
    bytes: int
    encodings: tuple[str, ...]


@dataclass(frozen=True)
class FileSummary:
    """What :func:`summarize` finds in a Lance data file.

    Attributes:
        path: the file as given.
        format_version: ``"2.0"``, ``"2.1"``, ``"2.2"``, or ``"0.1"`` for a legacy file.
        num_rows: the rows the file holds.
        size: its size in bytes.
        metadata_bytes: the bytes of its footer region (column metadata, descriptors, offsets).
        schema: the Arrow schema it stores.
        columns: the physical columns (empty for a legacy file, which has none).
        batches: a legacy file's batches (0 for a v2 file).
    """

    path: str
    format_version: str
    num_rows: int
    size: int
    metadata_bytes: int
    schema: pa.Schema
    columns: tuple[ColumnSummary, ...]
    batches: int = 0

    @property
    def data_bytes(self) -> int:
        """The bytes before the footer region: the data pages."""
        return self.size - self.metadata_bytes


def open_file(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> ByteSource:
    """A byte source over one file, a local path or a URI (``s3://``, ``memory://``, ...).

    Raises:
        LanceFileNotFoundError: there is no file there, or the path is a directory.
        StorageOptionsError: a storage option is unknown or has a bad value.
    """
    text = os.fspath(path)
    local = local_path(text)
    if local is not None and os.path.isdir(local):
        raise LanceFileNotFoundError(
            f"{text} is a directory, not a Lance data file (name one file, e.g. under data/; "
            "for a dataset use `lance-table info`)"
        )
    head, _, name = text.rstrip("/").rpartition("/")
    if not name or (local is None and "://" not in head):
        raise LanceFileNotFoundError(f"{text} names no file")
    storage = open_storage(head or ".", storage_options)
    try:
        size = storage.size(name)
    except (FileNotFoundError, IsADirectoryError):
        raise LanceFileNotFoundError(f"{text}: no such file") from None
    return storage.source(name, size)


def _encoding_summary(message: Any) -> str:
    names: list[str] = []

    def walk(msg: Any) -> None:
        for fd, value in msg.ListFields():
            if fd.message_type is None:
                continue
            for item in value if fd.is_repeated else [value]:
                name = fd.message_type.name
                if name not in _WRAPPERS and name not in names:
                    names.append(name)
                walk(item)

    walk(message)
    if not names:
        return type(message).__name__
    return names[0] + (f"({', '.join(names[1:])})" if len(names) > 1 else "")


def summarize(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> FileSummary:
    """A summary of one Lance data file (v2 or legacy): format, rows, sizes, schema and, for v2
    files, each column's pages, bytes and encodings.

    Raises:
        LanceFileNotFoundError: there is no file there, or the path is a directory.
        CorruptFileError: the file is not a Lance file (wrong magic) or is damaged.
        UnsupportedFormatError: a Lance format version this library does not read.
    """
    source = open_file(path, storage_options)
    size = source.size()
    name = os.fspath(path)
    if size >= _TAIL.size:
        major, minor, magic = _TAIL.unpack(bytes(source.read_ranges([(size - _TAIL.size, _TAIL.size)])[0]))
        if magic == MAGIC and is_legacy_footer(major, minor):
            legacy = read_legacy_metadata(source)
            schema = arrow_schema(build_tree(legacy.fields), legacy.schema_metadata)
            return FileSummary(
                name, "0.1", legacy.num_rows, size, size - legacy.metadata_position, schema, (),
                legacy.num_batches,
            )  # fmt: skip
    meta = read_metadata(source)
    columns = []
    for i, col in enumerate(meta.columns):
        encodings: list[str] = []
        for p, page in enumerate(col.pages):
            _, enc = unpack_encoding(page.encoding, source, f"column {i} page {p}")
            summary = _encoding_summary(enc) if enc is not None else "none"
            if summary not in encodings:
                encodings.append(summary)
        nbytes = sum(sum(page.buffer_sizes) for page in col.pages) + sum(col.buffer_sizes)
        values = meta.column_values[i] if i < len(meta.column_values) else sum(p.length for p in col.pages)
        columns.append(ColumnSummary(i, len(col.pages), values, nbytes, tuple(encodings)))
    data_bytes = sum(c.bytes for c in columns)
    return FileSummary(
        name, meta.version.value, meta.num_rows, size, size - data_bytes, meta.arrow_schema, tuple(columns)
    )


def describe(path: str, max_pages: int = 3) -> str:
    """A human-readable dump of a Lance file's metadata."""
    source = open_source(path)
    meta = read_metadata(source)
    lines = [
        f"{path}: {meta.size} bytes, format {meta.version.value}, {meta.num_rows} rows, "
        f"{len(meta.columns)} columns",
        f"schema: {meta.arrow_schema}",
    ]
    for f in meta.fields:
        lines.append(
            f"  field id={f.id} parent={f.parent_id} {f.name!r} {f.logical_type} "
            f"nullable={f.nullable} encoding={f.encoding} metadata={dict(f.metadata)}"
        )
    for i, col in enumerate(meta.columns):
        _, cenc = unpack_encoding(col.encoding, source, f"column {i}")
        shown = text_format.MessageToString(cenc, as_one_line=True) if cenc is not None else None
        lines.append(f"column {i}: {shown} pages={len(col.pages)}")
        for p, page in enumerate(col.pages[:max_pages]):
            _, penc = unpack_encoding(page.encoding, source, f"column {i} page {p}")
            bufs = list(zip(page.buffer_offsets, page.buffer_sizes))
            lines.append(f"  page {p}: rows={page.length} priority={page.priority} buffers={bufs}")
            lines.append("    " + text_format.MessageToString(penc, as_one_line=True))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--pages", type=int, default=3, help="pages shown per column")
    args = parser.parse_args(argv)
    for path in args.files:
        print(describe(path, args.pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
