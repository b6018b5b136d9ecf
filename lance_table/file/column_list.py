"""The column metadata of a Lance 2.x file, each column's parsed and checked when first used.

A file's footer lists one ``ColumnMetadata`` message per column. A read of a few columns of many
small files (a filter, a delete, a take on a long history) needs only those columns', so
:class:`ColumnList` parses a column's message, checks its buffers against the footer region and
adds up its page lengths on the first use of that column.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from operator import add
from typing import Any, TypeVar, overload

from google.protobuf.message import DecodeError

from lance_table._proto import file2_pb2
from lance_table.errors import CorruptFileError

_T = TypeVar("_T")

#: the most values a column (or rows a file) may claim
MAX_COUNT = 2**63 - 1


def parse_message(
    msg: Any, data: bytes | memoryview, path: str, what: str, offset: int, *, merge: bool = False
) -> Any:
    """``msg`` parsed from ``data`` (with ``merge``, merged into it: repeated fields appended); a
    typed error naming the file and what was read otherwise."""
    try:
        if merge:
            msg.MergeFromString(bytes(data))
        else:
            msg.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise CorruptFileError(
            path, f"{what} is not a valid protobuf message ({exc})", offset=offset
        ) from exc
    return msg


class ColumnList(Sequence[Any]):
    """The ``ColumnMetadata`` of a file's columns, each parsed and checked when first used: a read
    of a few columns of many small files (a filter, a delete, a take on a long history) parses
    only those columns' metadata. A column's buffers must lie before the footer region, its page
    lengths add up to its values (:attr:`values`), and a column that holds one value per row
    (:meth:`expect_rows`) must hold the file's rows.

    Raises:
        CorruptFileError: on the first use of a column whose metadata is damaged.
    """

    # Few objects per file, none in a reference cycle: a scan of thousands of small files keeps
    # one list per file, and the garbage collector walks every object such a list holds each
    # time it runs. The columns' bytes are one ``bytes`` (not tracked by the collector), their
    # places tuples of ints (untracked after the collector's first look).
    __slots__ = ("_expected", "_limit", "_offsets", "_parsed", "_path", "_region", "_starts")

    def __init__(
        self, region: bytes, offsets: tuple[int, ...], starts: int | tuple[int, ...], path: str, limit: int
    ) -> None:
        """``offsets``: each column's file offset and length, one after another (the file's
        offset table); ``starts``: where each column's metadata starts in ``region``, or the
        file offset where ``region`` starts (which then holds every column at its place)."""
        self._region = region
        self._offsets = offsets
        self._starts = starts
        self._path = path
        self._limit = limit
        #: each parsed column's message, values and first page's buffers
        self._parsed: dict[int, tuple[Any, int, tuple[tuple[int, int], ...]]] = {}
        #: the columns that must hold one value per row, and the rows (see expect_rows)
        self._expected: tuple[Container[int], int] | None = None

    @property
    def values(self) -> ColumnFacts[int]:
        """The values of each column (its page lengths added up), a sequence like this one."""
        return ColumnFacts(self, ColumnList.value_count)

    @property
    def first_buffers(self) -> ColumnFacts[tuple[tuple[int, int], ...]]:
        """Each column's first page's buffers as ``(file offset, size)`` pairs (none: no pages)."""
        return ColumnFacts(self, ColumnList.first_pairs)

    def __len__(self) -> int:
        return len(self._offsets) >> 1

    @property
    def limit(self) -> int:
        """Where the file's data ends (its footer region starts): no buffer may reach past it."""
        return self._limit

    def blob(self, index: int) -> bytes:
        """The stored bytes of column ``index``'s metadata (unparsed): files whose columns are
        described by the same bytes share what is made of them (see ``small_layouts``)."""
        start, end = self._bounds(index)
        return self._region[start:end]

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        found = self._parsed.get(index)
        return (found if found is not None else self._parse(index))[0]

    def value_count(self, index: int) -> int:
        """The values of column ``index`` (its metadata parsed and checked first).

        Raises:
            CorruptFileError: the column's metadata is damaged.
        """
        found = self._parsed.get(index)
        return (found if found is not None else self._parse(index))[1]

    def first_pairs(self, index: int) -> tuple[tuple[int, int], ...]:
        """Column ``index``'s first page's buffers as ``(file offset, size)`` pairs (parsed and
        checked first).

        Raises:
            CorruptFileError: the column's metadata is damaged.
        """
        found = self._parsed.get(index)
        return (found if found is not None else self._parse(index))[2]

    def raw(self, index: int) -> memoryview:
        """Column ``index``'s serialized ``ColumnMetadata``, as the file holds it (unchecked)."""
        start, end = self._bounds(index)
        return memoryview(self._region)[start:end]

    def _bounds(self, index: int) -> tuple[int, int]:
        """Where column ``index``'s metadata starts and ends in the region."""
        offsets, starts = self._offsets, self._starts
        start = offsets[2 * index] - starts if isinstance(starts, int) else starts[index]
        return start, start + offsets[2 * index + 1]

    def parse_all(self) -> None:
        """Parse and check every column's metadata now (a verification of the whole file).

        Raises:
            CorruptFileError: a column's metadata is damaged.
        """
        for index in range(len(self)):
            self.value_count(index)

    def expect_rows(self, columns: Container[int], rows: int) -> None:
        """Columns that must hold ``rows`` values (one per row), checked as each is parsed (the
        files of a dataset share one container of them: it is kept, not copied).

        Raises:
            CorruptFileError: a column parsed already holds another number.
        """
        self._expected = (columns, rows)
        for index, found in self._parsed.items():
            self._check_rows(index, found[1])

    def _check_rows(self, index: int, values: int) -> None:
        expected = self._expected
        if expected is not None and index in expected[0] and values != expected[1]:
            raise CorruptFileError(self._path, f"column {index} has {values} values for {expected[1]} rows")

    def _parse(self, index: int) -> tuple[Any, int, tuple[tuple[int, int], ...]]:
        index = range(len(self))[index]  # (a negative index counts from the end)
        col = parse_message(
            file2_pb2.ColumnMetadata(),
            self.raw(index),
            self._path,
            f"metadata of column {index}",
            self._offsets[2 * index],
        )
        values, first = _check_buffers(col, self._path, self._limit, index)
        self._check_rows(index, values)
        found = (col, values, first)
        self._parsed[index] = found  # one assignment: another thread sees all three or none
        return found


class ColumnFacts(Sequence[_T]):
    """A fact of each column of a :class:`ColumnList` (its values, its first page's buffers), each
    column parsed on first use."""

    __slots__ = ("_columns", "_get")

    def __init__(self, columns: ColumnList, get: Callable[[ColumnList, int], _T]) -> None:
        self._columns = columns
        self._get = get

    def __len__(self) -> int:
        return len(self._columns)

    @overload
    def __getitem__(self, index: int) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[_T, ...]: ...
    def __getitem__(self, index: int | slice) -> _T | tuple[_T, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        return self._get(self._columns, index)


def _check_buffers(col: Any, path: str, limit: int, index: int) -> tuple[int, tuple[tuple[int, int], ...]]:
    """Check that a column's buffers lie within ``limit`` and its page lengths add up to a
    count; returns that count (the column's values) and its first page's buffers as
    ``(offset, size)`` pairs (none when it has no pages)."""
    offsets, sizes = col.buffer_offsets, col.buffer_sizes
    if offsets or sizes:
        _check_pairs(offsets[:], sizes[:], path, limit, f"column {index}")
    total = 0
    first: tuple[tuple[int, int], ...] = ()
    # (slices of repeated fields: one list each, made at once; iterating a field costs 2-3x)
    for p, page in enumerate(col.pages[:]):
        total += page.length
        offsets, sizes = page.buffer_offsets[:], page.buffer_sizes[:]
        if len(offsets) != len(sizes) or (offsets and max(map(add, offsets, sizes)) > limit):
            _check_pairs(offsets, sizes, path, limit, f"column {index} page {p}")
        if not p:
            first = tuple(zip(offsets, sizes))
    if total > MAX_COUNT:
        raise CorruptFileError(path, f"column {index} pages claim more than {MAX_COUNT} values in all")
    return total, first


def buffers_end(col: Any) -> int:
    """The furthest byte any buffer of a parsed ``ColumnMetadata`` reaches (its own buffers and
    every page's): the end the file's data must reach for :class:`ColumnList` to accept it."""
    end = max(map(add, col.buffer_offsets, col.buffer_sizes), default=0)
    for page in col.pages[:]:
        end = max(end, max(map(add, page.buffer_offsets, page.buffer_sizes), default=0))
    return end


def _check_pairs(offsets: Any, sizes: Any, path: str, limit: int, what: str) -> None:
    """Check that buffers listed as offsets and sizes are as many of each and lie within ``limit``."""
    if len(offsets) != len(sizes):
        raise CorruptFileError(path, f"{what} lists {len(offsets)} buffer offsets but {len(sizes)} sizes")
    if offsets and max(map(add, offsets, sizes)) > limit:
        pos, length = next((p, n) for p, n in zip(offsets, sizes) if p + n > limit)
        raise CorruptFileError(path, f"{what} buffer [{pos}, {pos + length}) lies beyond the data")


__all__ = ["MAX_COUNT", "ColumnFacts", "ColumnList", "buffers_end", "parse_message"]
