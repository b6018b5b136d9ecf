"""The rewrite of one compaction bin: its fragments' live rows read in order (a few pieces ahead
of the writer) and written into new data files in the batches pylance's compaction writes."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator

import pyarrow as pa

from lance_table._parallel import FRAGMENTS, ahead_on, workers
from lance_table.errors import UnsupportedFormatError
from lance_table.file.runs import Runs
from lance_table.format.manifest import Fragment
from lance_table.table import blob_write, fragment_batch, scan
from lance_table.table.blob_write import is_blob_v2_arrow
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.compaction_bins import _Bin
from lance_table.table.operations.write import FragmentWriter
from lance_table.table.progress import SILENT, Reporter
from lance_table.table.snapshot import Snapshot

COPY_CHUNK_ROWS = 128 * 1024
#: the decoded bytes of the pieces read ahead of the writer, at most (at least one piece is).
#: Pieces of 100k rows of five columns (12 MB) are so read one at a time beside the writer: two
#: ahead on 2 cores added 13-20 MiB to a compaction's peak RSS (1M rows into one file, fresh
#: process, Arrow's memory in transparent huge pages) and gained no CPU time.
READ_AHEAD_BYTES = 16 * 1024 * 1024


def read_ahead(piece_bytes: int, threads: int | None = None) -> int:
    """How many pieces of ``piece_bytes`` decoded bytes a rewrite reads ahead of its writer: as
    many as fit in :data:`READ_AHEAD_BYTES` (at least one), and no more than ``threads`` (else
    :func:`~lance_table._parallel.workers`)."""
    return max(1, min(threads or workers(), READ_AHEAD_BYTES // max(piece_bytes, 1)))


def _rewrite_bin(
    ds: Snapshot,
    bin_: _Bin,
    max_bytes: int,
    data_format: str,
    report: Reporter = SILENT,
    write_tag: str = "",
    batch_rows: int | None = None,
    threads: int | None = None,
    target_rows: int | None = None,
) -> tuple[list[Fragment], list[str]]:
    # Like pylance 14, a bin becomes as many fragments as its live rows hold ``target_rows`` (at
    # least one), of even rows (unless one passes the byte limit).
    live = sum(bin_.live_rows)
    files = max(1, live // target_rows) if target_rows else 1
    writer = FragmentWriter(
        ds.storage,
        ds.schema,
        list(ds.manifest.fields),
        max_rows_per_file=-(-live // files) if files > 1 else 2**62,
        max_bytes_per_file=max_bytes,
        data_format=data_format,
        dictionaries=ds.manifest.dictionaries,
        write_tag=write_tag,
        progress=report,
    )
    # the rows read, in order, by fragment id: written in pylance's batches (see _rebatch)
    segments: deque[tuple[int, pa.Table]] = deque()
    try:
        # the footers the plan of pieces checks row counts against, read in parallel up front
        scan.open_all(bin_.fragments)
        names = ds.schema.names
        if any(is_blob_v2_arrow(f) for f in ds.schema):
            for frag in bin_.fragments:
                for lo in range(0, frag.physical_rows, COPY_CHUNK_ROWS):
                    runs: Runs = frag.live_runs(lo, min(lo + COPY_CHUNK_ROWS, frag.physical_rows))
                    if runs.total:
                        table = frag.read(names, runs)
                        # blob v2 columns read as descriptors: their bytes are written anew
                        blobs = blob_write.with_blob_bytes(ds, frag, table, runs, ds.schema)
                        segments.extend((frag.fragment.id, pa.Table.from_batches([b])) for b in blobs)
                        for batch in _rebatch(segments, batch_rows):
                            writer.write(batch)
        else:
            # Pieces of about COPY_CHUNK_ROWS rows (many small fragments read as one batch) are
            # read on the workers, a few ahead of the writer: memory stays bounded by the depth.
            def read(piece: list[tuple[FragmentReader, int, int]]) -> list[tuple[int, pa.Table]]:
                runs = [f.live_runs(lo, hi) for f, lo, hi in piece]
                table = fragment_batch.read([f for f, _, _ in piece], names, runs)
                starts = [0, *itertools.accumulate(r.total for r in runs)]
                return [
                    (f.fragment.id, table.slice(a, b - a))
                    for (f, _, _), a, b in zip(piece, starts, starts[1:])
                ]

            # The batches of a piece go to the writer together: each column shreds their rows
            # at once where no page or file can end among them (the same files). The first
            # piece is read here: its size bounds how many are read ahead (by bytes, so that
            # many cores do not multiply the memory in flight).
            pieces = _pieces(bin_.fragments)
            first = next(pieces, None)
            depth = 0
            if first is not None:
                read_segments = read(first)
                depth = read_ahead(sum(t.nbytes for _, t in read_segments), threads)
                segments.extend(read_segments)
                writer.write_many(list(_rebatch(segments, batch_rows)))
            # The pieces are even (as many rows each): when as many are read ahead as there are
            # workers, every worker has one, and each decodes its columns itself instead of
            # handing them to the decode pool's threads (on 2 cores that halved the compaction's
            # context switches); fewer pieces ahead (large ones: more cores than the bytes allow)
            # still decode theirs on the decode pool, so that the idle cores take part.
            for read_segments in ahead_on(FRAGMENTS, read, pieces, depth, even=True):
                segments.extend(read_segments)
                writer.write_many(list(_rebatch(segments, batch_rows)))
        writer.write_many(list(_rebatch(segments, batch_rows, final=True)))
        fragments = writer.finish()
        for fid, values in writer.dictionaries.items():
            known = ds.manifest.dictionaries.get(fid)
            if known is not None and len(values) != len(known):
                # A Rewrite cannot change the manifest's dictionary: the rows hold values it lacks.
                raise UnsupportedFormatError(
                    f"{ds.uri}: data files hold values of dictionary field {fid} that the manifest's "
                    "dictionary lacks; compaction cannot rewrite them"
                )
        return fragments, writer.paths
    except BaseException:
        writer.abort()
        raise


def _rebatch(
    segments: deque[tuple[int, pa.Table]], batch_rows: int | None, final: bool = False
) -> Iterator[pa.RecordBatch]:
    """Take rows off the front of ``segments`` (fragment id, live rows read, in order) as the
    batches pylance's compaction scan gives its writer, which checks the bytes written after each:
    ``batch_rows`` live rows at a time, counted from each fragment's first row (a fragment's last
    batch may be shorter). Rows that may still join a batch stay queued unless ``final``; with
    ``batch_rows`` None, every row goes, in batches of at most a segment."""
    while segments:
        fid = segments[0][0]
        k = next((i for i, (other, _) in enumerate(segments) if other != fid), len(segments))
        queued = sum(segments[i][1].num_rows for i in range(k))
        if k == len(segments) and not final and batch_rows is not None and queued < batch_rows:
            return  # the fragment's rows may continue in a segment not yet read
        if batch_rows is None:
            for _ in range(k):
                table = segments.popleft()[1]
                if table.num_rows:
                    yield from table.combine_chunks().to_batches()
            continue
        take = min(batch_rows, queued)
        parts, got = [], 0
        while got < take:
            _, table = segments.popleft()
            need = take - got
            if table.num_rows > need:
                segments.appendleft((fid, table.slice(need)))
                table = table.slice(0, need)
            parts.append(table)
            got += table.num_rows
        while segments and segments[0][0] == fid and not segments[0][1].num_rows:
            segments.popleft()
        if take:
            yield from pa.concat_tables(parts).combine_chunks().to_batches(max_chunksize=take)


def _pieces(frags: list[FragmentReader]) -> Iterator[list[tuple[FragmentReader, int, int]]]:
    """The fragments' rows in order, as lists of ranges ``(fragment, lo, hi)`` of about
    :data:`COPY_CHUNK_ROWS` rows in all (a large fragment in several, small ones together)."""
    piece: list[tuple[FragmentReader, int, int]] = []
    rows = 0
    for frag in frags:
        n = frag.physical_rows
        for lo in range(0, n, COPY_CHUNK_ROWS):
            hi = min(lo + COPY_CHUNK_ROWS, n)
            if piece and rows + hi - lo > COPY_CHUNK_ROWS:
                yield piece
                piece, rows = [], 0
            piece.append((frag, lo, hi))
            rows += hi - lo
    if piece:
        yield piece
