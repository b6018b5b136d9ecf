"""Legacy Lance data files (format 0.1, footer 0.2): the container, a reader with page statistics
and pruning by them, and a writer that computes them."""

from __future__ import annotations

from lance_table.file.legacy.container import LegacyMetadata, is_legacy_footer, read_legacy_metadata
from lance_table.file.legacy.reader import LegacyFileReader, LegacyReaderMetadata
from lance_table.file.legacy.writer import LegacyFileWriter, LegacyWrittenFile

__all__ = [
    "LegacyFileReader",
    "LegacyFileWriter",
    "LegacyMetadata",
    "LegacyReaderMetadata",
    "LegacyWrittenFile",
    "is_legacy_footer",
    "read_legacy_metadata",
]
