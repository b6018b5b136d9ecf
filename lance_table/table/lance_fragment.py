"""One fragment of a dataset version, with pylance's ``LanceFragment`` basics: its id and metadata,
row counts and scans of its rows alone (what Ray, lance-ray and Daft split reads by)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any

import pyarrow as pa

from lance_table.format.manifest import Fragment
from lance_table.table.fragment_metadata import DataFile, FragmentMetadata
from lance_table.table.scan import Predicate, count_matching, make_spec, output_schema, scan, scan_all
from lance_table.table.snapshot import Snapshot


class LanceFragment:
    """A fragment of one dataset version (it never changes). Pickles as its version and id."""

    def __init__(self, snapshot: Snapshot, fragment: Fragment) -> None:
        self._snapshot = snapshot
        self._fragment = fragment

    def __repr__(self) -> str:
        files = [f.path for f in self._fragment.files]
        return f"LanceFragment(id={self.fragment_id}, data_files={files})"

    @property
    def fragment_id(self) -> int:
        return self._fragment.id

    @cached_property
    def metadata(self) -> FragmentMetadata:
        """The fragment's metadata, as pylance's ``FragmentMetadata`` (a copy each handle owns)."""
        return FragmentMetadata.from_fragment(self._fragment)

    @property
    def physical_rows(self) -> int:
        """Rows of the fragment, deleted ones included."""
        return self._fragment.physical_rows

    @property
    def num_deletions(self) -> int:
        return self._fragment.num_deleted

    @property
    def schema(self) -> pa.Schema:
        return self._snapshot.read_schema

    def data_files(self) -> list[DataFile]:
        return list(self.metadata.files)

    def deletion_file(self) -> str | None:
        """The deletion file's path relative to the dataset root, if the fragment has one."""
        d = self._fragment.deletion_file
        return None if d is None else d.path(self.fragment_id)

    def count_rows(self, filter: Predicate | None = None) -> int:
        """Rows that are not deleted (and match ``filter``, if given).

        Raises:
            FilterError: the filter does not parse.
        """
        if filter is None:
            return self._fragment.num_rows
        spec = make_spec(self._snapshot.read_schema, [], filter, False, None, None, None)
        return count_matching(self._readers(), spec)

    def to_table(
        self,
        columns: Sequence[str] | None = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
    ) -> pa.Table:
        """The fragment's rows as one table (as ``Dataset.to_table`` over this fragment alone).

        Raises:
            SchemaError: a column does not exist.
            FilterError: the filter does not parse.
        """
        schema = self._snapshot.read_schema
        spec = make_spec(schema, columns, filter, with_row_id, 1 << 30, offset, limit)
        return scan_all(self._readers(), spec, output_schema(schema, spec))

    def to_batches(
        self,
        *,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """The fragment's rows in batches of at most ``batch_size`` rows (see :meth:`to_table`)."""
        schema = self._snapshot.read_schema
        spec = make_spec(schema, columns, filter, with_row_id, batch_size, offset, limit)
        return scan(self._readers(), spec, output_schema(schema, spec))

    def head(self, num_rows: int) -> pa.Table:
        return self.to_table(limit=num_rows)

    def _readers(self) -> list[Any]:
        return self._snapshot.fragment_readers([self.fragment_id])

    def __reduce__(self) -> tuple[Any, ...]:
        return _reopen, (self._snapshot, self.fragment_id)


def _reopen(snapshot: Snapshot, fragment_id: int) -> LanceFragment:
    return fragment_of(snapshot, fragment_id)


def fragment_of(snapshot: Snapshot, fragment_id: int) -> LanceFragment:
    """The fragment ``fragment_id`` of ``snapshot``.

    Raises:
        ValueError: the version has no such fragment.
    """
    for f in snapshot.manifest.fragments:
        if f.id == fragment_id:
            return LanceFragment(snapshot, f)
    raise ValueError(f"fragment id does not exist: {fragment_id}")
