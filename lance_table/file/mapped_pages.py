"""Reads of local files through a memory map (see :mod:`~lance_table.storage.mapped`): the pages
of a scan, and the pages of which a read keeps only some rows."""

from __future__ import annotations

from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.storage.mapped import MappedFileSource, mapped
from lance_table.storage.sources import LocalFileSource


def scanned(runs: Runs) -> bool:
    """Whether ``runs`` are a scan's: one span of at least :data:`MAPPED_ROWS` rows, read
    through a map of a local 2.1+ file (see :mod:`~lance_table.storage.mapped`; a 2.0 file's
    plain values would view the map, and be copied out of it: read, they are the read's buffer)."""
    return runs.count == 1 and runs.total >= MAPPED_ROWS


#: spans of at least this many rows are read through a map of a local file (a smaller read costs
#: less by ``preadv`` than the map's setup and page faults)
MAPPED_ROWS = 64 * 1024


def map_pages(source: LocalFileSource, pages: list[PageIO], every: bool) -> MappedFileSource | None:
    """Read ``pages`` (``every``: all of them, else those of which only some rows are kept)
    through a map of the file: their rows are then copied once, from the page cache (see
    :mod:`~lance_table.storage.mapped`). Their small buffers read so far stay as they are.
    Returns the map when every page reads through it (its arrays must then be made
    :meth:`~MappedFileSource.owned`), else None."""
    chosen = pages if every else [io for io in pages if io.filtered]
    view = mapped(source) if chosen else None
    if view is not None:
        for io in chosen:
            io.source = view
    return view if every else None
