"""What each page of a read decodes and keeps: the pages of a column without nesting are decoded
by jobs of their own (on the decoding threads), and a job selects the rows it keeps as soon as
its page is decoded, while the values are in cache; the jobs of pages with nothing to keep are not
made at all."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyarrow as pa

from lance_table.file.arrow_take import filter_rows
from lance_table.file.column_pages import ColumnPages
from lance_table.file.pageio import PageIO
from lance_table.file.runs import LONG_RUN, Runs

#: decodes some rows of one page
Job = Callable[[], list[pa.Array]]
#: a page to decode: its number, the runs inside it, and the reader of its buffers
PageRead = tuple[int, Runs, PageIO]

# A page holding at most this many runs, of this many rows each on average, is read run by run.
SPLIT_MAX_RUNS = 16
SPLIT_MIN_ROWS = LONG_RUN


def page_reads(
    col: ColumnPages,
    runs: Runs,
    pages: Iterable[PageRead],
    keep: pa.BooleanArray | None,
    page_io: Callable[[int], PageIO],
    *,
    split: bool = True,
) -> tuple[list[PageRead], list[pa.BooleanArray | None]]:
    """The reads of ``pages`` (those of ``col`` that ``runs`` touch), and for each the mask of
    the rows it decodes to keep (None: all of them).

    With ``keep`` (a mask over ``runs``, which are then one span), a page of which it marks no
    row is left out. Otherwise a page holding a few long runs (the live rows around a deleted
    range) is read as one span per run, each with a reader of its own (``page_io(page)``):
    decoding spans beats picking rows out of the page. ``split=False``: not so (each span would
    be a request of its own, sent one after another; the page's runs are one coalesced read).
    """
    out: list[PageRead] = []
    masks: list[pa.BooleanArray | None] = []
    lo = int(runs.starts[0]) if runs.count else 0
    for p, local, io in pages:
        if keep is not None:  # local: one span inside the page
            first = int(col.page_starts[p]) + int(local.starts[0]) - lo
            mask = keep.slice(first, int(local.lengths[0]))
            kept = mask.true_count
            if kept:
                io.filtered = kept < len(mask)
                out.append((p, local, io))
                masks.append(mask if io.filtered else None)
        elif split and 1 < local.count <= SPLIT_MAX_RUNS and local.total >= SPLIT_MIN_ROWS * local.count:
            for start, length in zip(local.starts.tolist(), local.lengths.tolist()):
                out.append((p, Runs.span(start, length), page_io(p)))
                masks.append(None)
        else:
            out.append((p, local, io))
            masks.append(None)
    return out, masks


def selecting(job: Job, mask: pa.BooleanArray | None) -> Job:
    """``job`` (decoding rows of one page), then only the rows ``mask`` marks of them."""
    if mask is None:
        return job

    def select() -> list[pa.Array]:
        return [filter_rows(arr, mask) for arr in job()]

    return select
