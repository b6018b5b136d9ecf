"""The embedded Lance file codec: read Lance data files of formats 2.0, 2.1 and 2.2; write format 2.0."""

from __future__ import annotations

from lance_table.file.container import FileMetadata, FileVersion
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import DEFAULT_PAGE_SIZE, LanceFileWriter, WrittenFile, write_table
from lance_table.storage.sources import ByteSource, BytesSource, FileObjectSource, LocalFileSource

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "ByteSource",
    "BytesSource",
    "FileMetadata",
    "FileObjectSource",
    "FileVersion",
    "LanceFileReader",
    "LanceFileWriter",
    "LocalFileSource",
    "WrittenFile",
    "write_table",
]
