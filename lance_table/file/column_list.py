"""The column metadata of a Lance 2.x file, each column's parsed and checked when first used.

A file's footer lists one ``ColumnMetadata`` message per column. A read of a few columns of many
small files (a filter, a delete, a take on a long history) needs only those columns', so
:class:`ColumnList` parses a column's message, checks its buffers against the footer region and
adds up its page lengths on the first use of that column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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

    __slots__ = (
        "_blobs",
        "_expected",
        "_first",
        "_limit",
        "_parsed",
        "_path",
        "_values",
        "first_buffers",
        "values",
    )

    def __init__(self, blobs: list[tuple[int, memoryview | bytes]], path: str, limit: int) -> None:
        self._blobs = blobs
        self._path = path
        self._limit = limit
        self._parsed: list[Any] = [None] * len(blobs)
        self._values: list[int] = [0] * len(blobs)
        self._first: list[tuple[tuple[int, int], ...]] = [()] * len(blobs)
        self._expected: dict[int, int] = {}
        #: the values of each column (its page lengths added up), a sequence like this one
        self.values: ColumnFacts[int] = ColumnFacts(self, self.value_count)
        #: each column's first page's buffers as ``(file offset, size)`` pairs (none: no pages)
        self.first_buffers: ColumnFacts[tuple[tuple[int, int], ...]] = ColumnFacts(self, self.first_pairs)

    def __len__(self) -> int:
        return len(self._blobs)

    @property
    def limit(self) -> int:
        """Where the file's data ends (its footer region starts): no buffer may reach past it."""
        return self._limit

    def blob(self, index: int) -> bytes:
        """The stored bytes of column ``index``'s metadata (unparsed): files whose columns are
        described by the same bytes share what is made of them (see ``small_layouts``)."""
        return bytes(self._blobs[index][1])

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        col = self._parsed[index]
        return col if col is not None else self._parse(index)

    def value_count(self, index: int) -> int:
        """The values of column ``index`` (its metadata parsed and checked first).

        Raises:
            CorruptFileError: the column's metadata is damaged.
        """
        if self._parsed[index] is None:
            self._parse(index)
        return self._values[index]

    def first_pairs(self, index: int) -> tuple[tuple[int, int], ...]:
        """Column ``index``'s first page's buffers as ``(file offset, size)`` pairs (parsed and
        checked first).

        Raises:
            CorruptFileError: the column's metadata is damaged.
        """
        if self._parsed[index] is None:
            self._parse(index)
        return self._first[index]

    def raw(self, index: int) -> memoryview | bytes:
        """Column ``index``'s serialized ``ColumnMetadata``, as the file holds it (unchecked)."""
        return self._blobs[index][1]

    def parse_all(self) -> None:
        """Parse and check every column's metadata now (a verification of the whole file).

        Raises:
            CorruptFileError: a column's metadata is damaged.
        """
        for index in range(len(self._blobs)):
            self.value_count(index)

    def expect_rows(self, columns: Iterable[int], rows: int) -> None:
        """Columns that must hold ``rows`` values (one per row), checked as each is parsed.

        Raises:
            CorruptFileError: a column parsed already holds another number.
        """
        for index in columns:
            self._expected[index] = rows
            if self._parsed[index] is not None:
                self._check_rows(index, self._values[index])

    def _check_rows(self, index: int, values: int) -> None:
        expected = self._expected.get(index)
        if expected is not None and values != expected:
            raise CorruptFileError(self._path, f"column {index} has {values} values for {expected} rows")

    def _parse(self, index: int) -> Any:
        index = range(len(self._blobs))[index]  # (a negative index counts from the end)
        pos, blob = self._blobs[index]
        col = parse_message(file2_pb2.ColumnMetadata(), blob, self._path, f"metadata of column {index}", pos)
        values, first = _check_buffers(col, self._path, self._limit, index)
        self._check_rows(index, values)
        self._values[index] = values
        self._first[index] = first
        self._parsed[index] = col  # last: another thread reads the values once this is set
        return col


class ColumnFacts(Sequence[_T]):
    """A fact of each column of a :class:`ColumnList` (its values, its first page's buffers), each
    column parsed on first use."""

    __slots__ = ("_columns", "_get")

    def __init__(self, columns: ColumnList, get: Callable[[int], _T]) -> None:
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
        return self._get(index)


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
