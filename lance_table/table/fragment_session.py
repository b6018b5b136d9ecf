"""pylance's ``FragmentSession``: repeated takes from one fragment with one projection."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_table.table import scanner as scans
from lance_table.table.scan_spec import Columns, ScanSpec, scan_spec
from lance_table.table.snapshot import Snapshot


class FragmentSession:
    """Takes from one fragment of one version, with the projection fixed when it was opened
    (``LanceFragment.open_session``); the columns are resolved once.

    Example:
        ```python
        session = ds.get_fragments()[0].open_session(columns=["id"], with_row_address=True)
        session.take([0, 5, 7])  # columns id, _rowaddr
        ```
    """

    def __init__(self, snapshot: Snapshot, fragment_id: int, spec: ScanSpec) -> None:
        self._snapshot = snapshot
        self._fragment_id = fragment_id
        self._spec = spec

    def take(self, indices: Any) -> pa.Table:
        """Rows by position among the fragment's live rows, in the order given.

        Raises:
            IndexError: an index is outside ``[0, count_rows())``.
        """
        return scans.take(self._snapshot, indices, self._spec, [self._fragment_id])


def open_session(
    snapshot: Snapshot, fragment_id: int, columns: Columns = None, with_row_address: bool | None = None
) -> FragmentSession:
    """A :class:`FragmentSession` over ``fragment_id`` with ``columns`` (all when None; a dict of
    SQL expressions too) and, with ``with_row_address``, the ``_rowaddr`` column last.

    Raises:
        SchemaError: a column does not exist.
        FilterError: a column expression does not parse.
    """
    spec = scan_spec(
        {"columns": columns, "with_row_address": bool(with_row_address)}, "LanceFragment.open_session"
    )
    scans.take(snapshot, [], spec, [fragment_id])  # resolve the projection now: a bad column fails here
    return FragmentSession(snapshot, fragment_id, spec)
