"""Schema evolution: add, merge, alter and drop columns

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_table.table.commit import check_can_commit
from lance_table.table.handle import Handle
from lance_table.table.operations.inputs import coerce_reader
from lance_table.table.progress import Progress

if TYPE_CHECKING:
    pass


class _SchemaEvolution(Handle):
    """Schema evolution: add, merge, alter and drop columns."""

    # -- schema evolution (the work is in operations/schema_udf.py, schema_add.py, schema_alter.py)

    def add_columns(
        self,
        transforms: Any,
        read_columns: list[str] | None = None,
        reader_schema: pa.Schema | None = None,
        batch_size: int | None = None,
        *,
        progress: Progress = None,
    ) -> None:
        """Add columns, written into a new data file of each fragment (existing files are kept):
        from SQL expressions (``{"b": "a * 2"}``), a batch UDF (:func:`lance_table.batch_udf`, or
        a plain function of a RecordBatch) reading ``read_columns`` (``_rowid``/``_rowaddr`` too),
        rows aligned with the dataset's (any reader-like data, ``reader_schema`` its schema), or
        all-null columns from pyarrow fields or a schema (metadata only). Commits a ``Merge``.

        ``progress`` (lance_table's): a bar on stderr when it is a terminal (None, the default;
        needs tqdm), always (True) or never (False), or a callable receiving
        :class:`~lance_table.progress.ProgressEvent` records (phase ``write``).

        Raises:
            SchemaChangeError: a new column's name is taken; aligned data has another row count.
            FilterError: a SQL expression does not compile.
            TypeError: ``transforms`` (or ``progress``, an InputTypeError) is of no kind taken.
            UnsupportedFormatError: all-null columns on a legacy dataset (as in pylance).
        """
        from lance_table.table.operations.schema_udf import plan_add_columns

        check_can_commit(self._snapshot.commit_options, self._storage)
        pending, udf = plan_add_columns(
            self._snapshot, transforms, read_columns, reader_schema, batch_size, progress
        )
        self._committed(self._snapshot.commit(pending))
        if udf is not None and udf.cache is not None:
            udf.cache.cleanup()

    def merge(
        self, data_obj: Any, left_on: str, right_on: str | None = None, schema: pa.Schema | None = None
    ) -> None:
        """Left-join the columns of ``data_obj`` onto the dataset where ``left_on`` equals the
        data's ``right_on`` (default ``left_on``); unmatched rows get nulls. Commits a ``Merge``.

        Raises:
            SchemaChangeError: a key column is missing, or a new column's name is taken.
            TypeError: ``data_obj`` is not reader-like.
        """
        from lance_table.table.operations.schema_merge import plan_merge

        check_can_commit(self._snapshot.commit_options, self._storage)
        reader = coerce_reader(data_obj, schema)
        pending = plan_merge(self._snapshot, reader, left_on, left_on if right_on is None else right_on)
        self._committed(self._snapshot.commit(pending))

    def alter_columns(self, *alterations: Mapping[str, Any]) -> None:
        """Rename columns (nested ones too), change their nullability, or cast them (integer and
        float widths, string/binary/list size variants): dicts with ``path`` and any of ``name``,
        ``nullable``, ``data_type``. Casts rewrite only the cast columns (a ``Merge``); the rest
        is metadata only (a ``Project``).

        Raises:
            SchemaChangeError: a path does not exist, a name is taken, a cast is not allowed or a
                value does not fit, or a column with nulls would become non-nullable.
        """
        from lance_table.table.operations.schema_alter import plan_alter_columns

        check_can_commit(self._snapshot.commit_options, self._storage)
        self._committed(self._snapshot.commit(plan_alter_columns(self._snapshot, alterations)))

    def drop_columns(self, columns: list[str]) -> None:
        """Drop columns (top-level names or nested ``"a.b"`` paths); metadata only (a ``Project``):
        compaction later rewrites the data without them.

        Raises:
            SchemaError: a column does not exist (a ValueError), or no column would be left.
        """
        from lance_table.table.operations.schema_alter import plan_drop_columns

        check_can_commit(self._snapshot.commit_options, self._storage)
        self._committed(self._snapshot.commit(plan_drop_columns(self._snapshot, columns)))
