"""pylance's ``ScannerBuilder``: a scan's options set one call at a time, then ``to_scanner()``.

Each method records one of the options :meth:`~lance_table.LanceDataset.scanner` takes, under the
same name; ``to_scanner()`` hands them all to it, so what a scan accepts, refuses (indices, vector
and full-text search, with a typed error naming the option) and returns is decided in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lance_table.errors import UnsupportedOptionError
from lance_table.table.scanner import LanceScanner


class ScannerBuilder:
    """Builds a :class:`~lance_table.LanceScanner` of a dataset (pylance's
    ``lance.dataset.ScannerBuilder``); every setter returns the builder.

    Example:
        ```python
        from lance_table.table.scanner_builder import ScannerBuilder

        scanner = ScannerBuilder(ds).columns(["id"]).filter("id < 5").limit(3).to_scanner()
        print(scanner.to_table())
        ```
    """

    def __init__(self, ds: Any) -> None:
        """A builder of a scan of ``ds`` (a dataset handle), with every option at its default."""
        self.ds = ds
        self._options: dict[str, Any] = {}

    def _set(self, name: str, value: Any) -> ScannerBuilder:
        self._options[name] = value
        return self

    def apply_defaults(self, default_opts: Mapping[str, Any]) -> ScannerBuilder:
        """Call the setter of each key with its value (a dict value as keyword arguments).

        Raises:
            ValueError: a key names no setter (as pylance).
        """
        for key, value in default_opts.items():
            setter = getattr(self, key, None) if not key.startswith("_") else None
            if setter is None or key in ("apply_defaults", "to_scanner"):
                raise ValueError(f"Unknown option {key}")
            setter(**value) if isinstance(value, dict) else setter(value)
        return self

    def batch_size(self, batch_size: int) -> ScannerBuilder:
        """The most rows per batch."""
        return self._set("batch_size", batch_size)

    def batch_size_bytes(self, batch_size_bytes: int) -> ScannerBuilder:
        """pylance's byte bound of a batch (tunes its engine; accepted)."""
        return self._set("batch_size_bytes", batch_size_bytes)

    def io_buffer_size(self, io_buffer_size: int) -> ScannerBuilder:
        """pylance's I/O buffer (tunes its engine; accepted)."""
        return self._set("io_buffer_size", io_buffer_size)

    def batch_readahead(self, nbatches: int | None = None) -> ScannerBuilder:
        """pylance's batch read-ahead (tunes its engine; accepted)."""
        return self._set("batch_readahead", nbatches)

    def fragment_readahead(self, nfragments: int | None = None) -> ScannerBuilder:
        """pylance's fragment read-ahead (tunes its engine; accepted)."""
        return self._set("fragment_readahead", nfragments)

    def scan_in_order(self, scan_in_order: bool = True) -> ScannerBuilder:
        """Whether batches come in the dataset's order (here they always do)."""
        return self._set("scan_in_order", scan_in_order)

    def limit(self, n: int | None = None) -> ScannerBuilder:
        """At most ``n`` rows."""
        return self._set("limit", n)

    def offset(self, n: int | None = None) -> ScannerBuilder:
        """Skip the first ``n`` matching rows."""
        return self._set("offset", n)

    def columns(self, cols: list[str] | dict[str, str] | None = None) -> ScannerBuilder:
        """The columns (a list of names) or output columns by SQL expression (a dict).

        Raises:
            TypeError: ``cols`` is neither (as pylance).
        """
        if cols is not None and not isinstance(cols, (list, dict)):
            raise TypeError(f"columns must be a list or dict[name, expression], got {type(cols)}")
        return self._set("columns", cols)

    def filter(self, filter: Any) -> ScannerBuilder:
        """The rows to keep: SQL text, a pyarrow compute expression, or pylance's dict with an
        ``expr_filter`` (a ``search_filter`` is a vector or full-text search: refused).

        Raises:
            UnsupportedOptionError: a search filter.
        """
        if isinstance(filter, Mapping):
            if filter.get("search_filter") is not None:
                raise UnsupportedOptionError("ScannerBuilder.filter", "search_filter")
            expr = filter.get("expr_filter")
            return self if expr is None else self.filter(expr)
        return self._set("filter", filter)

    def row_addr_prefilter(
        self, allowlist: bytes | None = None, blocklist: bytes | None = None
    ) -> ScannerBuilder:
        """Rows allowed or blocked by address (the scan refuses them when set)."""
        self._set("row_addr_allowlist", allowlist)
        return self._set("row_addr_blocklist", blocklist)

    def prefilter(self, prefilter: bool) -> ScannerBuilder:
        """Filter before a vector search (no result without one; accepted)."""
        return self._set("prefilter", prefilter)

    def with_row_id(self, with_row_id: bool = True) -> ScannerBuilder:
        """Append the ``_rowid`` column."""
        return self._set("with_row_id", with_row_id)

    def with_row_address(self, with_row_address: bool = True) -> ScannerBuilder:
        """Append the ``_rowaddr`` column."""
        return self._set("with_row_address", with_row_address)

    def late_materialization(self, late_materialization: bool | list[str] | None) -> ScannerBuilder:
        """pylance's late materialization (tunes its engine; accepted)."""
        return self._set("late_materialization", late_materialization)

    def blob_handling(self, blob_handling: str | None) -> ScannerBuilder:
        """How blob columns come out (the scan takes only the descriptors)."""
        return self._set("blob_handling", blob_handling)

    def use_stats(self, use_stats: bool = True) -> ScannerBuilder:
        """Skip pages whose statistics rule out a match (same rows either way)."""
        return self._set("use_stats", use_stats)

    def use_scalar_index(self, use_scalar_index: bool = True) -> ScannerBuilder:
        """Use scalar indices (same rows either way; accepted)."""
        return self._set("use_scalar_index", use_scalar_index)

    def with_fragments(self, fragments: Iterable[Any] | None) -> ScannerBuilder:
        """Scan only these fragments (``LanceFragment`` objects), in this order."""
        return self._set("fragments", None if fragments is None else list(fragments))

    def with_index_segments(self, index_segments: Iterable[Any] | None) -> ScannerBuilder:
        """Index segments of a search (the scan refuses them when set)."""
        return self._set("index_segments", None if index_segments is None else list(index_segments))

    def nearest(self, column: str, q: Any, k: int | None = None, **options: Any) -> ScannerBuilder:
        """A vector search (the scan refuses it: not supported by lance_table)."""
        return self._set("nearest", {"column": column, "q": q, "k": k, **options})

    def fast_search(self, flag: bool) -> ScannerBuilder:
        """Search only indexed rows (no result without a search; accepted)."""
        return self._set("fast_search", flag)

    def include_deleted_rows(self, flag: bool) -> ScannerBuilder:
        """Return deleted rows too (the scan refuses it when true)."""
        return self._set("include_deleted_rows", flag)

    def full_text_search(self, query: Any, columns: list[str] | None = None) -> ScannerBuilder:
        """A full-text search (the scan refuses it: not supported by lance_table)."""
        return self._set("full_text_query", {"query": query, "columns": columns})

    def minhash_search(self, query: Any) -> ScannerBuilder:
        """Raises: UnsupportedOptionError: a MinHash search is not supported by lance_table."""
        raise UnsupportedOptionError("ScannerBuilder", "minhash_search")

    def scan_stats_callback(self, callback: Any) -> ScannerBuilder:
        """Call ``callback`` with the scan's ``ScanStatistics`` once it has returned its last row."""
        return self._set("scan_stats_callback", callback)

    def strict_batch_size(self, strict_batch_size: bool = False) -> ScannerBuilder:
        """Every batch but the last has exactly ``batch_size`` rows."""
        return self._set("strict_batch_size", strict_batch_size)

    def order_by(self, orderings: list[Any] | None) -> ScannerBuilder:
        """Sort the matching rows (``ColumnOrdering`` values or column names)."""
        return self._set("order_by", orderings)

    def disable_scoring_autoprojection(self, disable: bool = True) -> ScannerBuilder:
        """pylance's search score column switch (no result without a search; accepted)."""
        return self._set("disable_scoring_autoprojection", disable)

    def substrait_aggregate(self, aggregate: bytes) -> ScannerBuilder:
        """Raises: UnsupportedOptionError: Substrait aggregates are not supported by lance_table."""
        raise UnsupportedOptionError("ScannerBuilder", "substrait_aggregate")

    def to_scanner(self) -> LanceScanner:
        """The scanner of the options set.

        Raises:
            as :meth:`~lance_table.LanceDataset.scanner` (an option it does not support, named).
        """
        scanner: LanceScanner = self.ds.scanner(**self._options)
        return scanner
