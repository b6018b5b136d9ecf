"""Byte algorithms shared by the file format versions, both directions: FSST (``fsst`` decodes,
``fsst_train`` trains tables, ``fsst_encode`` compresses), FastLanes bitpacking, RLE, general
(zstd / lz4) compression, byte-stream split and dictionary encoding. All vectorized with numpy and
pyarrow."""

from __future__ import annotations

from typing import Protocol

from lance_table.errors import CorruptFileError


class Where(Protocol):
    """Where bytes being decompressed come from, for error messages (a page's ``PageIO``)."""

    @property
    def path(self) -> str: ...

    @property
    def what(self) -> str: ...

    def corrupt(self, problem: str) -> CorruptFileError: ...
