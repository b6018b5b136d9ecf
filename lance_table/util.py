"""pylance's ``lance.util`` helpers for time values (its index-training helpers are out of
lance_table's scope): :func:`sanitize_ts` and :func:`td_to_micros`."""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

from lance_table.errors import InputTypeError

__all__ = ["sanitize_ts", "td_to_micros"]


def _pandas() -> Any:
    """pandas when the program has imported it (as pylance checks), else None."""
    return sys.modules.get("pandas")


def sanitize_ts(ts: Any) -> dt.datetime:
    """A ``datetime`` of a timestamp given as a ``datetime``, a pandas ``Timestamp`` or a string
    (parsed by pandas when the program has imported it, else as ``%Y-%m-%d %H:%M:%S``), as pylance's
    ``sanitize_ts``.

    Raises:
        ValueError: a string that does not parse.
        InputTypeError: any other type (a TypeError, as pylance raises).

    Example:
        ```python
        from lance_table.util import sanitize_ts

        print(sanitize_ts("2024-01-02 03:04:05"))
        ```
    """
    pd = _pandas()
    if isinstance(ts, str):
        if pd is not None:
            return pd.to_datetime(ts).to_pydatetime()
        try:
            return dt.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise ValueError(f"Failed to parse timestamp string {ts}. Try installing Pandas.") from None
    if pd is not None and isinstance(ts, pd.Timestamp):
        return ts.to_pydatetime()
    if not isinstance(ts, dt.datetime):
        raise InputTypeError(f"Unrecognized version timestamp {ts} of type {type(ts)}")
    return ts


def td_to_micros(td: dt.timedelta) -> int:
    """The microseconds of ``td``, rounded (pylance's ``td_to_micros``).

    Raises:
        TypeError: ``td`` is not a ``timedelta``.

    Example:
        ```python
        import datetime as dt
        from lance_table.util import td_to_micros

        print(td_to_micros(dt.timedelta(seconds=1.5)))
        ```
    """
    return round(td / dt.timedelta(microseconds=1))
