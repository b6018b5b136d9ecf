"""The scan specification: one frozen, keyword-only value that every read takes (``to_table``,
``to_batches``, ``scanner``, ``head``, ``take``, ``sample``, ``count_rows`` and the fragment API),
built from pylance's scan options by :func:`scan_spec`.

pylance's options fall in three groups:

* options that choose the result: :class:`ScanSpec`'s fields;
* :data:`TUNING`: knobs of pylance's Rust engine that change no result (read-ahead depths, buffer
  sizes, index use, late materialization, ...). They are accepted and have no effect here;
* :data:`UNSUPPORTED`: options that would change the result (vector and full-text search,
  row address allow/block lists, deleted rows, raw blob bytes). Set to
  anything but their default, they raise :class:`~lance_table.errors.UnsupportedOperationError`
  naming them; they are never silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pyarrow.compute as pc

from lance_table.errors import ScanOptionError, UnsupportedOperationError

DEFAULT_BATCH_SIZE = 8192
# pylance's environment variable for the batch size of scans that name none
BATCH_SIZE_ENV = "LANCE_DEFAULT_BATCH_SIZE"


def default_batch_size() -> int:
    """Rows per batch of a scan that names no batch size: ``LANCE_DEFAULT_BATCH_SIZE`` when set
    to a positive integer (read at each scan, as pylance reads it), else 8192."""
    text = os.environ.get(BATCH_SIZE_ENV, "")
    return int(text) if text.strip().isdigit() and int(text) > 0 else DEFAULT_BATCH_SIZE


#: What ``columns=`` takes: names, or output names to SQL expressions (None: every column).
Columns: TypeAlias = "Sequence[str] | Mapping[str, str] | None"

#: Options of pylance's engine that change no result: accepted, without effect.
TUNING = frozenset(
    {
        "batch_size_bytes",
        "batch_readahead",
        "fragment_readahead",
        "io_buffer_size",
        "late_materialization",
        "use_scalar_index",
        "fast_search",
        "prefilter",
        "disable_scoring_autoprojection",
        # pyarrow's ``Dataset.scanner`` knobs, which pyarrow.dataset consumers pass
        "use_threads",
        "cache_metadata",
        "memory_pool",
    }
)
#: Options that change the result and are not implemented, with the values that mean "off".
UNSUPPORTED: Mapping[str, tuple[Any, ...]] = {
    "nearest": (None,),
    "full_text_query": (None,),
    "index_segments": (None,),
    "row_addr_allowlist": (None,),
    "row_addr_blocklist": (None,),
    "include_deleted_rows": (None, False),
    "blob_handling": (None, "blobs_descriptions"),
}
#: Options every read takes (pylance's ``scanner`` keywords that are fields of :class:`ScanSpec`).
FIELDS = (
    "columns",
    "filter",
    "limit",
    "offset",
    "batch_size",
    "with_row_id",
    "with_row_address",
    "fragments",
    "scan_in_order",
    "use_stats",
    "strict_batch_size",
    "order_by",
    "scan_stats_callback",
)


@dataclass(frozen=True, kw_only=True)
class ScanSpec:
    """What a read returns. Every field's default is pylance's.

    Attributes:
        columns: top-level columns, nested fields (``"s.x"``) and system columns (``_rowid``,
            ``_rowaddr``, ``_rowoffset``) in output order; None for every column.
        expressions: ``(name, SQL expression)`` pairs, pylance's ``columns={...}``; when set,
            ``columns`` is None.
        filter: SQL text or a pyarrow compute expression; it may read ``_rowid`` and ``_rowaddr``.
        limit, offset: at most ``limit`` rows, after skipping ``offset`` matching rows.
        batch_size: the most rows per batch (None: the scan's default).
        with_row_id, with_row_address: append ``_rowid`` / ``_rowaddr`` (unless projected already).
        fragments: scan only these fragments (ids), in this order.
        scan_in_order: pylance may return batches out of order when False; here they always come
            in order, which is one of the orders pylance may return.
        use_stats: skip pages whose statistics prove that no row matches (same rows either way).
        strict_batch_size: every batch but the last has exactly ``batch_size`` rows.
        order_by: ``(column, ascending, nulls_first)`` sort keys, applied to the matching rows
            before ``offset`` and ``limit`` (pylance's ``ColumnOrdering`` or column names).
        scan_stats_callback: called once with a ``ScanStatistics`` when the scan has returned its
            last row (``to_table``, or a stream read to its end), as pylance calls it.
    """

    columns: tuple[str, ...] | None = None
    expressions: tuple[tuple[str, str], ...] | None = None
    filter: str | pc.Expression | None = None
    limit: int | None = None
    offset: int | None = None
    batch_size: int | None = None
    with_row_id: bool = False
    with_row_address: bool = False
    fragments: tuple[int, ...] | None = None
    scan_in_order: bool = True
    use_stats: bool = True
    strict_batch_size: bool = False
    order_by: tuple[tuple[str, bool, bool], ...] | None = None
    scan_stats_callback: Callable[[Any], object] | None = field(default=None, compare=False, repr=False)


def scan_spec(options: Mapping[str, Any], where: str = "scanner") -> ScanSpec:
    """The specification of pylance's scan ``options`` (``None`` meaning the default, as in
    pylance); ``where`` names the method for messages.

    Raises:
        TypeError: an option pylance does not have; ``columns`` that are not a list or a dict.
        ScanOptionError: a negative ``limit`` or ``offset``, a ``batch_size`` below 1, a filter that
            is neither SQL text nor an expression.
        UnsupportedOperationError: an option that would change the result and is not implemented.
    """
    given = {k: v for k, v in options.items() if k not in ("self", "options", "kwargs")}
    for name, value in given.items():
        if name in TUNING or name in FIELDS:
            continue
        if name in UNSUPPORTED:
            if not any(
                value is off or (value == off and type(value) is type(off)) for off in UNSUPPORTED[name]
            ):
                raise UnsupportedOperationError(
                    f"{where}(): option {name}={value!r} is not supported by lance_table"
                )
            continue
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
    columns, expressions = _columns(given.get("columns"))
    limit, offset, batch_size = (given.get(k) for k in ("limit", "offset", "batch_size"))
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and (not isinstance(value, int) or value < 0):
            # (pylance's words, which its users match)
            raise ScanOptionError(f"{name.capitalize()} must be non-negative (an integer), got {value!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ScanOptionError(f"batch_size must be a positive integer, got {batch_size!r}")
    if given.get("strict_batch_size") and batch_size is None:
        raise ScanOptionError("strict_batch_size needs a batch_size")
    return ScanSpec(
        columns=columns,
        expressions=expressions,
        filter=_filter(given.get("filter")),
        limit=limit,
        offset=offset,
        batch_size=batch_size,
        with_row_id=bool(given.get("with_row_id")),
        with_row_address=bool(given.get("with_row_address")),
        fragments=fragment_ids(given.get("fragments")),
        scan_in_order=given.get("scan_in_order") is not False,
        use_stats=given.get("use_stats") is not False,
        strict_batch_size=bool(given.get("strict_batch_size")),
        order_by=_order_by(given.get("order_by")),
        scan_stats_callback=_callback(given.get("scan_stats_callback")),
    )


def _callback(callback: Any) -> Callable[[Any], object] | None:
    if callback is not None and not callable(callback):
        raise TypeError(f"scan_stats_callback must be callable, got {type(callback).__name__}")
    return callback


def _columns(columns: Any) -> tuple[tuple[str, ...] | None, tuple[tuple[str, str], ...] | None]:
    if columns is None:
        return None, None
    if isinstance(columns, Mapping):
        pairs = tuple((str(k), v) for k, v in columns.items())
        for name, sql in pairs:
            if not isinstance(sql, str):
                raise TypeError(f"column {name!r}: an expression must be SQL text, not {type(sql).__name__}")
        return None, pairs
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Iterable):
        raise TypeError(f"columns must be a list or dict[name, expression], got {type(columns)}")
    names = tuple(columns)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"column names must be strings, got {name!r}")
    return names, None


@dataclass(frozen=True)
class ColumnOrdering:
    """One sort key of a scan's ``order_by`` (pylance's ``ColumnOrdering``): a column, ascending or
    not, nulls first or last.

    Example:
        ```python
        by_score = [lt.ColumnOrdering("score", ascending=False)]
        top = ds.to_table(columns=["id", "score"], order_by=by_score, limit=3)
        ```
    """

    column_name: str
    ascending: bool = True
    nulls_first: bool = False


def _order_by(value: Any) -> tuple[tuple[str, bool, bool], ...] | None:
    """Sort keys from column names (ascending, nulls last) or pylance's ``ColumnOrdering``s."""
    if value is None or (isinstance(value, Sequence) and not isinstance(value, str) and not value):
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"order_by must be a list of column names or ColumnOrderings, got {value!r}")
    keys = []
    for key in value:
        if isinstance(key, str):
            keys.append((key, True, False))
        elif hasattr(key, "column_name"):
            asc, first = getattr(key, "ascending", True), getattr(key, "nulls_first", False)
            keys.append((str(key.column_name), bool(asc), bool(first)))
        else:
            raise TypeError(f"order_by takes column names or ColumnOrderings, got {key!r}")
    return tuple(keys)


def _filter(value: Any) -> str | pc.Expression | None:
    if isinstance(value, Mapping):  # pylance's combined filter: {"expr_filter": ..., "search_filter": ...}
        if value.get("search_filter") is not None:
            raise UnsupportedOperationError("filter: search_filter (full-text search) is not supported")
        value = value.get("expr_filter")
    if value is None or isinstance(value, (str, pc.Expression)):
        return value
    raise ScanOptionError(
        f"filter must be SQL text or a pyarrow compute Expression, not {type(value).__name__}"
    )


def fragment_ids(fragments: Any) -> tuple[int, ...] | None:
    """The ids of ``fragments`` (``LanceFragment``s, ``FragmentMetadata`` or ids), in order.

    Raises:
        TypeError: an element is none of these.
    """
    if fragments is None:
        return None
    ids = []
    for f in fragments:
        if isinstance(f, int) and not isinstance(f, bool):
            ids.append(f)
        elif hasattr(f, "fragment_id"):
            ids.append(int(f.fragment_id))
        elif hasattr(f, "id") and hasattr(f, "files"):
            ids.append(int(f.id))
        else:
            raise TypeError(f"fragments must be LanceFragments or FragmentMetadata, got {type(f).__name__}")
    return tuple(ids)
