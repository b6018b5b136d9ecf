"""The reads of :mod:`fragment_batch`: the byte spans of many fragments' files, or ranges of
each, all in flight at once on a remote store."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from concurrent.futures import wait
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table._parallel import ARROW_READS, pool
from lance_table.file import utf8
from lance_table.file.reader import LanceFileReader
from lance_table.file.runs import Runs
from lance_table.file.v2_0 import small_take as small_take20
from lance_table.file.v2_1 import small_many, small_take
from lance_table.file.v2_1.byteranges import exclusive_cumsum
from lance_table.format import paths
from lance_table.storage.mapped import mapped
from lance_table.storage.scatter import read_into
from lance_table.storage.sources import LocalFileSource
from lance_table.table.deletion import missing_file_error
from lance_table.table.fragment import FragmentReader

#: on a remote store, the files' spans of a batch up to this size are all requested at once
#: (larger ones, read in parts at once by the store's source, one after another)
CONCURRENT_SPAN_BYTES = 8 * 1024 * 1024


def fetch(frags: Sequence[FragmentReader], readers: list[LanceFileReader]) -> small_take.Fetch:
    """How :mod:`small_take` reads ranges of the fragments' files: one request per file (all
    in flight at once on a remote store, as :func:`spans` sends them)."""

    def one(k: int, ranges: np.ndarray) -> memoryview:
        try:
            return readers[k].read_joined(ranges)
        except FileNotFoundError:  # deleted since the reader was opened
            raise missing(frags[k]) from None

    def fetch(wanted: list[tuple[int, np.ndarray]]) -> list[memoryview]:
        if len(wanted) < 2 or frags[0].storage.read_parallelism <= 0:
            return [one(k, r) for k, r in wanted]
        ahead = [pool(ARROW_READS).submit(contextvars.copy_context().run, one, k, r) for k, r in wanted]
        try:
            return [f.result() for f in ahead]
        finally:
            for f in ahead:
                f.cancel()
            wait(ahead)

    return fetch


def maps(readers: list[LanceFileReader]) -> small_take.Maps | None:
    """How :mod:`small_take` maps the readers' files (see :mod:`mapped_take`), when all are local
    files; None otherwise. A file that cannot be mapped (deleted since its reader was opened, or
    of another size) maps none: the read then goes by ``preadv``, which says what is wrong."""
    sources = [r._stored for r in readers]
    if not all(isinstance(s, LocalFileSource) for s in sources):
        return None

    def arrays() -> list[np.ndarray] | None:
        out = []
        for source in sources:
            view = mapped(source)  # type: ignore[arg-type]  # (local: checked above)
            if view is None:
                return None
            out.append(view.array())
        return out

    return arrays


def missing(frag: FragmentReader) -> Exception:
    """The error for a fragment's data file deleted since its reader was opened."""
    where = f"{frag.storage.uri.rstrip('/')}/{paths.data_file_path(frag.fragment.files[0].path)}"
    return missing_file_error(frag.storage, where, frag.version)


def spans(frags: Sequence[FragmentReader], found: list[tuple[LanceFileReader, Any]]) -> list[memoryview]:
    """Each file's span of the batch's columns. On a remote store (whose every request waits a
    round trip) the small spans are all in flight at once, each on the
    :data:`ARROW_READS` pool, none on the calling thread: that pool's threads are as many as
    the store's client keeps connections, so no request waits for, or opens, a connection of its
    own (a leaf pool: its reads of small spans wait on nothing else).

    Raises:
        DataFileNotFoundError: a file was deleted since its reader was opened.
    """

    def span(k: int) -> memoryview:
        reader, lay = found[k]
        try:
            return reader.read_span(lay.start, lay.length)
        except FileNotFoundError:  # deleted since the reader was opened
            raise missing(frags[k]) from None

    at_once = (  # (a file read whole when opened sends no request: it is no read to wait for)
        [
            k
            for k, (reader, lay) in enumerate(found)
            if lay.length <= CONCURRENT_SPAN_BYTES and not reader.holds_bytes
        ]
        if frags[0].storage.read_parallelism > 0
        else []
    )
    if not at_once:
        return [span(k) for k in range(len(found))]
    # each read in the caller's context (what it collects: a scan's read counts)
    ahead = {k: pool(ARROW_READS).submit(contextvars.copy_context().run, span, k) for k in at_once}
    try:
        return [ahead[k].result() if k in ahead else span(k) for k in range(len(found))]
    finally:
        for f in ahead.values():
            f.cancel()
        wait(ahead.values())


def joined_spans(
    frags: Sequence[FragmentReader], found: list[tuple[LanceFileReader, Any]]
) -> tuple[memoryview, np.ndarray]:
    """Each file's span of the batch's columns in one buffer, each from a multiple of
    :data:`small_many.ALIGN`, and where each starts (as :func:`small_many.joined` of :func:`spans`).
    Local files none of whose opening bytes serve the read are read straight into their places
    (one ``preadv`` each), not each into a buffer of its own and then copied.

    Raises:
        DataFileNotFoundError: a file was deleted since its reader was opened.
        CorruptFileError: a span lies outside its file.
    """
    if len(found) < 2 or any(
        not isinstance(reader._stored, LocalFileSource) or reader.holds_bytes for reader, _ in found
    ):
        return small_many.joined(spans(frags, found))
    lengths = np.fromiter((lay.length for _, lay in found), np.int64, len(found))
    padded = -(-lengths // small_many.ALIGN) * small_many.ALIGN
    bases = exclusive_cumsum(padded)
    out = empty(int(padded.sum()), np.uint8)
    view = memoryview(out)  # type: ignore[arg-type]
    for k, (start, end, stop) in enumerate(
        zip(bases.tolist(), (bases + lengths).tolist(), (bases + padded).tolist())
    ):
        reader, lay = found[k]
        try:
            read_into(reader._stored, [(lay.start, [view[start:end]])])  # type: ignore[arg-type]
        except FileNotFoundError:  # deleted since the reader was opened
            raise missing(frags[k]) from None
        out[end:stop] = 0
    return view, bases


#: a 2.0 file's rows read by their byte ranges (see :func:`few_rows_v20`) when a read takes at most
#: this share of them: each costs a range of each column, where its whole pages cost their bytes
FEW_ROWS_SHARE = 1 / 16


def few_rows_v20(
    frags: Sequence[FragmentReader], names: list[str], schema: pa.Schema, runs: Sequence[Runs]
) -> pa.Table | None:
    """The rows ``runs`` of single-file 2.0 fragments read by their byte ranges (a take): one
    request per file for all the columns, one more for strings' bytes (see :mod:`small_take20`).
    None when they are to be read the usual way (which names the file at fault). The caller
    checks that the runs lie within the fragments' rows."""
    roots = frags[0].roots
    readers = []
    columns: list[list[Any]] = [[] for _ in names]
    for frag in frags:
        files = frag.fragment.files
        if len(files) != 1 or files[0].base_id is not None:
            return None
        if (files[0].file_major_version, files[0].file_minor_version) != (2, 0):
            return None
        reader = frag._reader(files[0])
        if not isinstance(reader, LanceFileReader):
            return None
        by_id = frag.stored_roots(files[0])
        for c, name in enumerate(names):
            stored = by_id.get(roots[name].id)
            if (
                stored is None
                or stored.arrow_type != roots[name].arrow_type
                or pa.types.is_dictionary(stored.arrow_type)
            ):
                return None
            got = small_take20.pages(reader, stored)
            if got is None:
                return None
            columns[c].append(got)
        readers.append(reader)
    arrays = small_take20.read(
        columns,
        [r.positions() for r in runs],
        [roots[name].arrow_type for name in names],
        fetch(frags, readers),
    )
    if arrays is None or any(
        (arr.null_count and not roots[name].field.nullable) or utf8.problem_of(arr, arr.type) is not None
        for arr, name in zip(arrays, names)
    ):
        return None
    return pa.Table.from_arrays(arrays, schema=schema)
