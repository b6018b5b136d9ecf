"""Reading: fragments, counts, scans, takes and blobs

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_table.blob_values import DEFAULT_BLOB_BUFFER_SIZE
from lance_table.table import blob_reads, sql_query
from lance_table.table import scanner as scans
from lance_table.table.blobs import BlobFile, take_blobs
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.handle import Handle
from lance_table.table.pandas_export import DEFAULT_BLOB_MODE
from lance_table.table.scan import Predicate
from lance_table.table.scan_spec import Columns, scan_spec
from lance_table.table.scanner import LanceScanner
from lance_table.table.session import Session, session_of
from lance_table.table.sql_query import SqlQueryBuilder

if TYPE_CHECKING:
    from lance_table.table.lance_fragment import LanceFragment


class _Reading(Handle):
    """Reading: fragments, counts, scans, takes and blobs."""

    # -- reading ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        """The rows of this version (pylance's ``len(ds)``: ``count_rows()``)."""
        return self.count_rows()

    def __bool__(self) -> bool:
        """A handle is true, whatever its rows (``len`` says how many)."""
        return True

    def sql(self, sql: str) -> SqlQueryBuilder:
        """An SQL ``SELECT`` over this version (pylance's ``sql``); ``FROM dataset`` names it,
        or the name given to ``.table_name(...)``. See :mod:`lance_table.table.sql_query` for
        what runs.

        Raises:
            TypeError: ``sql`` is not a string (the query is checked by ``build()``).
        """
        return sql_query.sql(self._snapshot, sql)

    def session(self) -> Session:
        """The caches this handle reads through (pylance's ``session()``; lance_table's are the
        process's, see :mod:`lance_table.table.session`)."""
        return session_of(self._snapshot.storage)

    def get_fragments(self, filter: Any = None) -> list[LanceFragment]:
        """The fragments of this version (pylance's ``LanceFragment`` basics; ``filter`` must be
        None, as in pylance)."""
        from lance_table.table.lance_fragment import LanceFragment

        if filter is not None:
            raise ValueError("get_fragments() does not support filter yet")
        return [LanceFragment(self._snapshot, fragment=f) for f in self.manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        """The fragment with this id, or None."""
        from lance_table.table.lance_fragment import fragment_of

        try:
            return fragment_of(self._snapshot, fragment_id)
        except ValueError:
            return None

    def count_rows(self, filter: Predicate | None = None, **options: Any) -> int:
        """Rows of this version (matching ``filter``, if given); ``options`` as :meth:`scanner`'s
        (``fragments=`` counts those fragments' rows).

        Raises:
            FilterError: the filter does not parse.
            ScanOptionError: a ``limit`` or ``offset`` is given (as in pylance).
        """
        if filter is None and not options:  # (what the scanner answers, without making one)
            return self._snapshot.num_rows
        return LanceScanner(
            self._snapshot, scan_spec({"filter": filter, **options}, "count_rows")
        ).count_rows()

    def scanner(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        fragments: Sequence[LanceFragment | FragmentMetadata] | None = None,
        index_segments: Any = None,
        full_text_query: Any = None,
        **options: Any,
    ) -> LanceScanner:
        """A scanner over this version, taking pylance's ``scanner`` options.

        ``columns``: names (nested ``"s.x"`` and ``_rowid``, ``_rowaddr``, ``_rowoffset`` too) or a
        dict of output names to SQL expressions. ``filter``: SQL or a pyarrow compute expression
        (it may read ``_rowid`` and ``_rowaddr``). ``fragments``: only those, in that order.
        Keyword-only options: ``with_row_id``, ``with_row_address``, ``use_stats``,
        ``strict_batch_size`` and pylance's tuning knobs, which change no result (see
        :mod:`lance_table.table.scan_spec`).

        Raises:
            TypeError: an option pylance does not have, or ``columns`` of the wrong type.
            ScanOptionError: a negative limit or offset, a batch size below 1.
            UnsupportedOperationError: an option that would change the result and is not implemented
                (``nearest``, ``full_text_query``, ``order_by``, ...).
        """
        return LanceScanner(self._snapshot, scan_spec(self._scan_options({**locals(), **options}), "scanner"))

    def to_batches(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        **options: Any,
    ) -> pa.RecordBatchReader:
        """The rows as a RecordBatchReader (streams; DuckDB, Polars and pandas can consume it);
        options as :meth:`scanner`'s.

        Raises:
            as :meth:`scanner` and :meth:`to_table`.
        """
        spec = scan_spec(self._scan_options({**locals(), **options}), "to_batches")
        return LanceScanner(self._snapshot, spec).to_reader()

    def to_table(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        **options: Any,
    ) -> pa.Table:
        """The rows as one table; options as :meth:`scanner`'s (``fragments=`` too).

        Raises:
            SchemaError: a column does not exist, or an output column is named twice.
            FilterError: the filter or a column expression does not parse.
            ValueError: a fragment is not in this version.
            TypeError, ScanOptionError, UnsupportedOperationError: as :meth:`scanner`.
        """
        spec = scan_spec(self._scan_options({**locals(), **options}), "to_table")
        return LanceScanner(self._snapshot, spec).to_table()

    def to_pandas(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        *,
        prefilter: bool | None = None,
        with_row_id: bool | None = None,
        with_row_address: bool | None = None,
        use_stats: bool | None = None,
        fast_search: bool | None = None,
        full_text_query: Any = None,
        io_buffer_size: int | None = None,
        late_materialization: bool | list[str] | None = None,
        blob_mode: str = DEFAULT_BLOB_MODE,
        use_scalar_index: bool | None = None,
        include_deleted_rows: bool | None = None,
        order_by: Any = None,
        disable_scoring_autoprojection: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """The rows as a pandas DataFrame: scan options as :meth:`to_table`'s, ``blob_mode`` (how
        blob columns come out; only "descriptions", the descriptors, is supported), and
        ``kwargs`` for ``pyarrow.Table.to_pandas``.

        Raises:
            as :meth:`to_table`; UnsupportedOptionError: blob columns with another ``blob_mode``.
        """
        given = {k: v for k, v in locals().items() if k not in ("self", "kwargs", "blob_mode", "__class__")}
        spec = scan_spec(self._scan_options(given), "to_pandas")
        return LanceScanner(self._snapshot, spec).to_pandas(blob_mode=blob_mode, **kwargs)

    def head(self, num_rows: int, **options: Any) -> pa.Table:
        """The first ``num_rows`` rows; options as :meth:`scanner`'s.

        Raises:
            as :meth:`to_table`.
        """
        spec = scan_spec(self._scan_options({**options, "limit": num_rows}), "head")
        return LanceScanner(self._snapshot, spec).to_table()

    def slice(self, start: int, end: int, columns: Columns = None) -> pa.Table:
        """Rows ``[start, end)`` by position (pylance's ``slice``: an offset/limit scan).

        Raises:
            ScanOptionError: ``start`` is negative or ``end`` is below ``start``.
        """
        return LanceScanner(self._snapshot, scans.slice_spec(start, end, columns)).to_table()

    def take(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        columns: Columns = None,
    ) -> pa.Table:
        """Rows by position in this version (deleted rows do not count), in the order given;
        ``columns`` as :meth:`scanner`'s.

        Raises:
            IndexError: an index is outside ``[0, count_rows())``.
            SchemaError: a column does not exist.
        """
        return scans.take_columns(self._snapshot, indices, columns)

    def _take_rows(
        self,
        row_ids: Sequence[int] | np.ndarray | pa.Array,
        columns: Columns = None,
        *,
        ignore_deletions: bool = False,
        **options: Any,
    ) -> pa.Table:
        """Rows by row id (stable ids on datasets with stable row ids, else row addresses), in the
        order given; deleted rows are left out (pylance's unstable ``_take_rows``).
        ``ignore_deletions`` is accepted: the result holds the live rows either way.

        Raises:
            IndexError: an address names no fragment of this version, or an offset past its rows.
            SchemaError: a column does not exist.
        """
        return scans.take_by_ids(self._snapshot, row_ids, scan_spec({"columns": columns}, "_take_rows"))

    def sample(
        self,
        num_rows: int,
        columns: Columns = None,
        randomize_order: bool = True,
        **options: Any,
    ) -> pa.Table:
        """``num_rows`` distinct rows at random (in random order unless ``randomize_order`` is False).

        Raises:
            ValueError: ``num_rows`` is negative or above the number of rows.
            SchemaError: a column does not exist.
        """
        return scans.sample(
            self._snapshot, num_rows, scan_spec({"columns": columns}, "sample"), randomize_order
        )

    def take_blobs(
        self,
        blob_column: str,
        ids: Sequence[int] | np.ndarray | pa.Array | None = None,
        addresses: Sequence[int] | np.ndarray | pa.Array | None = None,
        indices: Sequence[int] | np.ndarray | pa.Array | None = None,
        *,
        allow_external: bool = False,
        buffer_size: int = DEFAULT_BLOB_BUFFER_SIZE,
    ) -> list[BlobFile | None]:
        """The values of a blob column as lazy, seekable binary files (pylance's ``take_blobs``).

        Select rows by exactly one of ``ids`` (row ids), ``addresses`` (fragment id << 32 | offset)
        or ``indices`` (positions in this version); one element per selected row, None for a null
        blob. Blobs at URIs outside the dataset are opened only with ``allow_external``, and
        only below one of the dataset's registered base paths (object store schemes only).
        ``buffer_size`` (pylance's read-ahead of each file) tunes pylance only: checked, kept
        on each file, no other effect.

        Raises:
            ValueError: not exactly one selection is given; a negative ``buffer_size``.
            TypeError: ``buffer_size`` is not an int.
            SchemaError: the column is not a top-level blob column.
            IndexError: an index or address names no row.
            UnsupportedFormatError: an external blob without ``allow_external``; row ids of a
                dataset with stable row ids.
            BlobLocationError: an external blob outside the registered base paths, with an
                unknown scheme or escaping its base (never opened).
            CorruptFileError: a blob descriptor is damaged, points outside its file or names a
                sidecar that does not exist.
            DataFileNotFoundError: a data file does not exist.
        """
        return take_blobs(
            self._snapshot,
            blob_column,
            ids=ids,
            addresses=addresses,
            indices=indices,
            allow_external=allow_external,
            buffer_size=buffer_size,
        )

    def read_blobs(
        self,
        blob_column: str,
        ids: Sequence[int] | np.ndarray | pa.Array | None = None,
        addresses: Sequence[int] | np.ndarray | pa.Array | None = None,
        indices: Sequence[int] | np.ndarray | pa.Array | None = None,
        *,
        io_buffer_size: int | None = None,
        preserve_order: bool | None = None,
        allow_external: bool = False,
    ) -> list[tuple[int, bytes | None]]:
        """The bytes of a blob column at the selected rows, read into memory (pylance's
        ``read_blobs``): one ``(row_address, bytes)`` per row selected by exactly one of ``ids``,
        ``addresses`` or ``indices``, in that order; None for a null blob. ``io_buffer_size`` and
        ``preserve_order`` tune pylance's reader only (the order is always kept).

        Raises:
            ValueError: not exactly one selection is given.
            SchemaError: the column is not a top-level blob column.
            IndexError: an index or address names no row.
            UnsupportedFormatError: an external blob without ``allow_external``.
            CorruptFileError: a blob descriptor is damaged.
        """
        return blob_reads.read_blobs(
            self._snapshot, blob_column, ids, addresses, indices, allow_external=allow_external
        )

    def read_blob_ranges(
        self,
        blob_column: str,
        requests: Sequence[tuple[int, int, int]],
        *,
        selector: str,
        io_buffer_size: int | None = None,
        preserve_order: bool | None = None,
        allow_external: bool = False,
    ) -> list[tuple[int, int, bytes | None]]:
        """Byte ranges of blobs (pylance's ``read_blob_ranges``): for each ``(row, offset,
        length)`` request, ``(request_index, row_address, bytes)``, with ``row`` a row id, row
        address or index as ``selector`` (``"ids"``, ``"addresses"``, ``"indices"``) says; None
        on a null blob. ``io_buffer_size`` and ``preserve_order`` tune pylance's reader only.

        Raises:
            BlobValueError: an unknown selector, a malformed request, or a range past the end
                of its blob (a ValueError).
            IndexError: a row that does not exist.
            SchemaError: the column is not a top-level blob column.
            CorruptFileError: a blob descriptor is damaged.
        """
        return blob_reads.read_blob_ranges(
            self._snapshot, blob_column, requests, selector, allow_external=allow_external
        )
