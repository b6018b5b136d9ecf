"""The ``lance_table`` data source for ``spark.read`` / ``df.write``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource

from lance_table.errors import SchemaError
from lance_table.spark.options import SourceOptions
from lance_table.spark.read import LanceTableReader, PushdownReader
from lance_table.spark.types import spark_arrow_schema, spark_schema
from lance_table.spark.write import LanceTableWriter


class LanceTableDataSource(DataSource):
    """Reads one pinned version of a dataset and writes DataFrames as one atomic commit.

    Read options: ``version``, ``tag``, ``asof`` (ISO timestamp), ``columns`` (comma-separated),
    ``filter`` (SQL predicate), ``batch_size``, ``max_rows_per_partition``, ``storage_options``
    (a JSON object). Write options: ``storage_options``, ``max_rows_per_file``, ``commit_message``,
    ``data_storage_version`` (for a new dataset or an overwrite).
    """

    @classmethod
    def name(cls) -> str:
        return "lance_table"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._opts = SourceOptions.parse(options)
        self._dataset: Any = None

    def _pinned(self) -> Any:
        """The dataset at the requested version, resolved once for the whole query."""
        if self._dataset is None:
            import lance_table as lt

            o = self._opts
            version = o.tag if o.tag is not None else o.version
            self._dataset = lt.dataset(
                o.path, version=version, asof=o.asof, storage_options=o.storage_options
            )
        return self._dataset

    def _columns(self) -> list[str]:
        names = self._pinned().schema.names
        if self._opts.columns is None:
            return list(names)
        missing = [c for c in self._opts.columns if c not in names]
        if missing:
            raise SchemaError(f"columns {missing} are not in {self._opts.path}; columns are {names}")
        return list(self._opts.columns)

    def schema(self) -> Any:
        ds = self._pinned()
        return spark_schema(pa.schema([ds.schema.field(c) for c in self._columns()]))

    reader_class: type[LanceTableReader] = LanceTableReader

    def reader(self, schema: Any) -> LanceTableReader:
        ds = self._pinned()
        names = ds.schema.names
        columns = [f.name for f in schema.fields]
        missing = [c for c in columns if c not in names]
        if missing:
            raise SchemaError(f"columns {missing} are not in {self._opts.path}; columns are {names}")
        o = self._opts
        return self.reader_class(
            o.path,
            o.storage_options,
            ds.manifest.fields,
            ds.manifest.schema_metadata,
            ds.manifest.fragments,
            columns,
            spark_arrow_schema(schema),
            o.filter,
            o.batch_size,
            o.max_rows_per_partition,
            dictionaries=ds.manifest.dictionaries,
        )

    def writer(self, schema: Any, overwrite: bool) -> LanceTableWriter:
        o = self._opts
        return LanceTableWriter(
            o.path,
            o.storage_options,
            spark_arrow_schema(schema),
            overwrite,
            max_rows_per_file=o.max_rows_per_file,
            commit_message=o.commit_message,
            data_storage_version=o.data_storage_version,
        )

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        """The Structured Streaming sink (see :mod:`lance_table.spark.streaming_sink`)."""
        from lance_table.spark.streaming_options import StreamOptions
        from lance_table.spark.streaming_sink import LanceStreamWriter

        o, stream = self._opts, StreamOptions.parse(self.options)
        return LanceStreamWriter(
            o.path,
            o.storage_options,
            spark_arrow_schema(schema),
            overwrite,
            query_id=stream.query_id,
            dedupe_lookback=stream.dedupe_lookback,
            checkpoint=stream.checkpoint,
            max_rows_per_file=o.max_rows_per_file,
            commit_message=o.commit_message,
            data_storage_version=o.data_storage_version,
        )

    def streamReader(self, schema: Any) -> Any:
        """The Structured Streaming source (see :mod:`lance_table.spark.streaming_source`)."""
        from lance_table.spark.streaming_options import StreamOptions
        from lance_table.spark.streaming_source import LanceStreamReader

        ds, o = self._pinned(), self._opts
        names = ds.schema.names
        columns = [f.name for f in schema.fields]
        missing = [c for c in columns if c not in names]
        if missing:
            raise SchemaError(f"columns {missing} are not in {o.path}; columns are {names}")
        return LanceStreamReader(
            o.path,
            o.storage_options,
            ds.version,
            ds.manifest.fields,
            ds.manifest.schema_metadata,
            columns,
            spark_arrow_schema(schema),
            o.batch_size,
            o.max_rows_per_partition,
            StreamOptions.parse(self.options),
            dictionaries=ds.manifest.dictionaries,
        )


class PushdownDataSource(LanceTableDataSource):
    """The same source with filter pushdown, installed by :func:`lance_table.spark.register`."""

    reader_class = PushdownReader
