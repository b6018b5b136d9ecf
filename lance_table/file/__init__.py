"""The embedded Lance file codec: read Lance data files of formats 2.0, 2.1 and 2.2 and write them.

:class:`LanceFileReader` and :class:`LanceFileWriter` here are pylance's file API (``lance.file``);
the codec classes underneath, which work on file objects and byte sources, are
:class:`lance_table.file.reader.LanceFileReader` and :class:`lance_table.file.writer.LanceFileWriter`.
"""

from __future__ import annotations

from lance_table.file.api import (
    LanceBufferDescriptor,
    LanceColumnMetadata,
    LanceColumnStatistics,
    LanceFileMetadata,
    LanceFileReader,
    LanceFileStatistics,
    LanceFileWriter,
    LancePageMetadata,
    ReaderResults,
    stable_version,
)
from lance_table.file.container import FileMetadata, FileVersion
from lance_table.file.session import LanceFileSession, ListResult
from lance_table.file.writer import DEFAULT_PAGE_SIZE, WrittenFile, write_table
from lance_table.storage.sources import ByteSource, BytesSource, FileObjectSource, LocalFileSource

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "ByteSource",
    "BytesSource",
    "FileMetadata",
    "FileObjectSource",
    "FileVersion",
    "LanceBufferDescriptor",
    "LanceColumnMetadata",
    "LanceColumnStatistics",
    "LanceFileMetadata",
    "LanceFileReader",
    "LanceFileSession",
    "LanceFileStatistics",
    "LanceFileWriter",
    "LancePageMetadata",
    "ListResult",
    "LocalFileSource",
    "ReaderResults",
    "WrittenFile",
    "stable_version",
    "write_table",
]
