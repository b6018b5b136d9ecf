"""Concatenating Lance 2.x files without decoding them (pylance's "binary copy" compaction).

Files of the same version, schema and column layout are joined into one: the bytes before each
input's metadata (its page buffers) are copied as they are, one input after the other, each
starting at a multiple of 64 bytes, and each column's pages are listed in order with their buffer
offsets moved by where their input's bytes landed (in 2.1/2.2 files, a page's priority, the row
of its first row, moves by the rows before its input). Nothing a page's encoding holds refers to
a position in the file (its buffers are named by their index in the page), so the pages read as
they did. The output's file descriptor is the first input's with the total row count; the inputs
have no other global buffer and no column-level buffers (:func:`plan_concat` checks it all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import add
from typing import IO, Any

from lance_table._proto import file2_pb2, file_pb2
from lance_table.errors import CorruptFileError
from lance_table.file.column_list import parse_message
from lance_table.file.columns import Sink, write_tail
from lance_table.file.container import PADDING_BYTE, PAGE_ALIGNMENT, FileMetadata, FileVersion
from lance_table.file.fields import BLOB_KEY
from lance_table.file.v2_1.blob_v2 import is_blob_v2

#: how many bytes of an input are read at once, by default (pylance's default read batch)
DEFAULT_READ_BATCH_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ConcatInput:
    """One file to concatenate: its parsed metadata, and how to read ``length`` of its bytes at
    ``offset`` (``read(offset, length)``, one request)."""

    meta: FileMetadata
    read: Callable[[int, int], memoryview | bytes]


@dataclass(frozen=True)
class ConcatResult:
    """What :func:`write_concat` wrote."""

    num_rows: int
    size: int


@dataclass
class ConcatPlan:
    """The concatenation of :attr:`inputs`: where each one's bytes go and the output's columns."""

    inputs: Sequence[ConcatInput]
    #: the bytes copied of each input: its first ``ends[i]`` bytes (every page buffer in them)
    ends: list[int]
    #: where each input's bytes start in the output
    bases: list[int]
    #: the output's column metadata: every input's pages, moved
    columns: list[Any]
    num_rows: int


def _align(n: int) -> int:
    return n + (-n % PAGE_ALIGNMENT)


def plan_concat(inputs: Sequence[ConcatInput]) -> ConcatPlan | str:
    """The concatenation of ``inputs`` page by page, or why they cannot be concatenated: they
    must be files of one version with the same schema (fields and schema metadata), rows, no
    global buffer but the file descriptor, the same column encodings, no column-level buffers,
    page encodings held in the column metadata, and no blob columns; 2.0 files may hold only
    top-level fields (struct header and list offset columns are not concatenated).

    Raises:
        CorruptFileError: a column's metadata is damaged.
    """
    if not inputs:
        return "no files"
    first = inputs[0].meta
    if any(is_blob_v2(f) or BLOB_KEY in f.metadata for f in first.fields):
        return "blob columns are written anew"
    if first.version is FileVersion.V2_0 and any(f.parent_id != -1 for f in first.fields):
        return "2.0 files with nested fields"
    n_cols = len(first.columns)
    # each input's column metadata is merged into the output's as it is stored (its pages are
    # appended, in one parse), then its new pages are moved; the column encoding, merged too,
    # stays the first input's only if the input's is the same
    columns = [file2_pb2.ColumnMetadata() for _ in range(n_cols)]
    encodings = [first.columns[c].encoding for c in range(n_cols)]
    structural = first.version is not FileVersion.V2_0
    ends: list[int] = []
    bases: list[int] = []
    base = rows = 0
    for item in inputs:
        meta = item.meta
        if meta.version is not first.version:
            return f"{meta.path} is a {meta.version.value} file, {first.path} a {first.version.value} one"
        if meta.fields is not first.fields and meta.fields != first.fields:
            return f"{meta.path} has another schema than {first.path}"
        if meta.schema_metadata != first.schema_metadata:
            return f"{meta.path} has other schema metadata than {first.path}"
        if len(meta.global_buffers) != 1:
            return f"{meta.path} has {len(meta.global_buffers) - 1} global buffers besides its descriptor"
        if not meta.num_rows:
            return f"{meta.path} holds no rows"
        if len(meta.columns) != n_cols:
            return f"{meta.path} has {len(meta.columns)} columns, {first.path} {n_cols}"
        end = 0
        for c, col in enumerate(columns):
            start = len(col.pages)
            parse_message(col, meta.columns.raw(c), meta.path, f"metadata of column {c}", 0, merge=True)
            if col.buffer_offsets or col.buffer_sizes:
                return f"column {c} of {meta.path} has column-level buffers"
            if col.encoding != encodings[c]:
                return f"column {c} of {meta.path} has another column encoding than {first.path}"
            moved = _move_pages(col.pages[start:], base, rows if structural else 0, meta.path, c)
            if moved < 0:
                return f"column {c} of {meta.path} keeps page encodings in the file"
            end = max(end, moved)
        if end > meta.columns.limit:
            raise CorruptFileError(
                meta.path, f"page buffers end at {end}, beyond the data ({meta.columns.limit})"
            )
        ends.append(end)
        bases.append(base)
        base = _align(base + end)
        rows += meta.num_rows
    return ConcatPlan(inputs, ends, bases, columns, rows)


def write_concat(
    plan: ConcatPlan, out: IO[bytes], read_batch_bytes: int = DEFAULT_READ_BATCH_BYTES
) -> ConcatResult:
    """Write the concatenation ``plan`` to ``out``, reading at most ``read_batch_bytes`` of an
    input at once.

    Raises:
        ValueError: ``read_batch_bytes`` is below 1.
        CorruptFileError: an input's bytes are shorter than its metadata says.
    """
    if read_batch_bytes < 1:
        raise ValueError(f"read_batch_bytes must be positive, got {read_batch_bytes}")
    first = plan.inputs[0].meta
    sink = Sink(out)
    descriptor_bytes: memoryview | bytes | None = None
    gb0_pos, gb0_len = first.global_buffers[0]
    for i, (item, end, base) in enumerate(zip(plan.inputs, plan.ends, plan.bases)):
        assert sink.pos == base
        if item.meta.size <= read_batch_bytes:  # a small file in one read (the descriptor with it)
            whole = _read(item, 0, item.meta.size)
            sink.write(whole[:end])
            if not i:
                descriptor_bytes = whole[gb0_pos : gb0_pos + gb0_len]
        else:
            for lo in range(0, end, read_batch_bytes):
                sink.write(_read(item, lo, min(read_batch_bytes, end - lo)))
        sink.write(PADDING_BYTE * (-sink.pos % PAGE_ALIGNMENT))
    if descriptor_bytes is None:
        descriptor_bytes = _read(plan.inputs[0], gb0_pos, gb0_len)
    descriptor = parse_message(
        file_pb2.FileDescriptor(), descriptor_bytes, first.path, "file descriptor", gb0_pos
    )
    descriptor.length = plan.num_rows
    write_tail(
        sink, descriptor.SerializeToString(), (), [c.SerializeToString() for c in plan.columns], first.version
    )
    return ConcatResult(plan.num_rows, sink.pos)


def _read(item: ConcatInput, offset: int, length: int) -> memoryview | bytes:
    data = item.read(offset, length)
    if len(data) != length:
        raise CorruptFileError(
            item.meta.path, f"{length} bytes at {offset} read as {len(data)}", offset=offset
        )
    return data


def _move_pages(pages: Sequence[Any], base: int, first_row: int, path: str, column: int) -> int:
    """Move ``pages`` (``ColumnMetadata.Page`` messages) by ``base`` bytes and ``first_row`` rows;
    returns where their last buffer ends in their file, or -1 when a page's encoding lies in the
    file (an indirect one, which names a position there).

    Raises:
        CorruptFileError: a page lists more buffer offsets than sizes, or fewer.
    """
    end = 0
    for page in pages:
        if page.encoding.HasField("indirect"):
            return -1
        offsets = page.buffer_offsets[:]
        if offsets:
            sizes = page.buffer_sizes[:]
            if len(sizes) != len(offsets):
                raise CorruptFileError(
                    path,
                    f"a page of column {column} lists {len(offsets)} buffer offsets but {len(sizes)} sizes",
                )
            end = max(end, max(map(add, offsets, sizes)))
            if base:
                del page.buffer_offsets[:]
                page.buffer_offsets.extend([o + base for o in offsets])
        elif page.buffer_sizes:
            raise CorruptFileError(path, f"a page of column {column} lists buffer sizes but no offsets")
        if first_row:
            page.priority += first_row
    return end
