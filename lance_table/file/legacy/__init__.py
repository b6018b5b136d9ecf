"""Legacy Lance data files (format 0.1, footer 0.2): the container, a reader with page statistics
and pruning by them, and a writer that computes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lance_table._lazy as _lazy
from lance_table.file.legacy.container import LegacyMetadata, is_legacy_footer, read_legacy_metadata
from lance_table.file.legacy.reader import LegacyFileReader, LegacyReaderMetadata

if TYPE_CHECKING:
    from lance_table.file.legacy.writer import LegacyFileWriter, LegacyWrittenFile

#: the writer (and its statistics encoder) imported on first use: reading needs neither
_LAZY: _lazy.Names = {
    "LegacyFileWriter": ("lance_table.file.legacy.writer", "LegacyFileWriter"),
    "LegacyWrittenFile": ("lance_table.file.legacy.writer", "LegacyWrittenFile"),
}

__getattr__, __dir__ = _lazy.hooks(__name__, _LAZY)  # public names imported on first use


__all__ = [
    "LegacyFileReader",
    "LegacyFileWriter",
    "LegacyMetadata",
    "LegacyReaderMetadata",
    "LegacyWrittenFile",
    "is_legacy_footer",
    "read_legacy_metadata",
]
