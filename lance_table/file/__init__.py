"""The embedded Lance file codec: read Lance data files of formats 2.0, 2.1 and 2.2 and write them.

:class:`LanceFileReader` and :class:`LanceFileWriter` here are pylance's file API (``lance.file``);
the codec classes underneath, which work on file objects and byte sources, are
:class:`lance_table.file.reader.LanceFileReader` and :class:`lance_table.file.writer.LanceFileWriter`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lance_table._lazy as _lazy

if TYPE_CHECKING:
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

#: imported on first use (PEP 562): reading a file needs neither the writer nor pylance's file API
_LAZY: _lazy.Names = {
    "LanceBufferDescriptor": ("lance_table.file.api", "LanceBufferDescriptor"),
    "LanceColumnMetadata": ("lance_table.file.api", "LanceColumnMetadata"),
    "LanceColumnStatistics": ("lance_table.file.api", "LanceColumnStatistics"),
    "LanceFileMetadata": ("lance_table.file.api", "LanceFileMetadata"),
    "LanceFileReader": ("lance_table.file.api", "LanceFileReader"),
    "LanceFileStatistics": ("lance_table.file.api", "LanceFileStatistics"),
    "LanceFileWriter": ("lance_table.file.api", "LanceFileWriter"),
    "LancePageMetadata": ("lance_table.file.api", "LancePageMetadata"),
    "ReaderResults": ("lance_table.file.api", "ReaderResults"),
    "stable_version": ("lance_table.file.api", "stable_version"),
    "FileMetadata": ("lance_table.file.container", "FileMetadata"),
    "FileVersion": ("lance_table.file.container", "FileVersion"),
    "LanceFileSession": ("lance_table.file.session", "LanceFileSession"),
    "ListResult": ("lance_table.file.session", "ListResult"),
    "DEFAULT_PAGE_SIZE": ("lance_table.file.writer", "DEFAULT_PAGE_SIZE"),
    "WrittenFile": ("lance_table.file.writer", "WrittenFile"),
    "write_table": ("lance_table.file.writer", "write_table"),
    "ByteSource": ("lance_table.storage.sources", "ByteSource"),
    "BytesSource": ("lance_table.storage.sources", "BytesSource"),
    "FileObjectSource": ("lance_table.storage.sources", "FileObjectSource"),
    "LocalFileSource": ("lance_table.storage.sources", "LocalFileSource"),
}

__getattr__, __dir__ = _lazy.hooks(__name__, _LAZY)  # public names imported on first use


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
