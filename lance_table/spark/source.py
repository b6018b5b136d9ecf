"""The ``lance_table`` data source for ``spark.read`` / ``df.write`` and Spark SQL tables."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource

from lance_table.errors import SchemaError
from lance_table.spark.options import (
    NO_PATH,
    SPARK_OPTION_PREFIX,
    SourceOptions,
    location_of,
    merge_storage,
    table_options,
    with_location,
)
from lance_table.spark.read import SYSTEM_COLUMNS as READ_SYSTEM_COLUMNS
from lance_table.spark.read import LanceTableReader, PushdownReader
from lance_table.spark.types import spark_arrow_schema, spark_schema
from lance_table.spark.worker import settle_worker
from lance_table.spark.write import LanceTableWriter

# Columns a read may ask for by name beside the dataset's (``columns`` option): a row's address
# (fragment id in the high 32 bits, position in the low ones) and its row id, as Spark longs.
SYSTEM_COLUMNS = {name: pa.field(name, pa.int64(), False) for name in READ_SYSTEM_COLUMNS}
# Keys Spark passes only when it infers the schema of a catalog table it is creating.
_CATALOG_KEYS = frozenset(("location", "provider", "owner"))
NO_TABLE_LOCATION = (
    "Spark does not pass a catalog table's location to a Python data source's writer, nor a table's "
    "location to reads of tables it did not let the source describe. Make the table with "
    "lance_table.spark.create_table(spark, name, uri) or lance_table.spark.attach(spark, root), or "
    "CREATE TABLE ... USING the source lance_table.spark.table_source(spark, uri) returns; or write "
    "with df.write.format('lance_table').mode('append').save(uri)"
)

NO_TABLE_STORAGE_OPTIONS = (
    "option 'storage_options' cannot be kept by a catalog table: Spark hands later reads of the "
    "table none of its OPTIONS, and credentials are not stored in its schema. Set them in the Spark "
    "conf as spark.lance_table.<option> (then call lance_table.spark.register(spark)), or make the "
    "table with lance_table.spark.create_table(spark, name, uri, storage_options=...); a "
    "temporary view (CREATE TEMP VIEW ... USING lance_table OPTIONS (...)) keeps them"
)


class LanceTableDataSource(DataSource):
    """Reads one version of a dataset and writes DataFrames as one atomic commit.

    Read options: ``version``, ``tag``, ``asof`` (ISO timestamp), ``columns`` (comma-separated;
    ``_rowaddr`` and ``_rowid`` may be among them), ``filter`` (SQL predicate), ``batch_size``,
    ``max_rows_per_partition``, ``storage_options``
    (a JSON object). Write options: ``storage_options``, ``max_rows_per_file``, ``commit_message``,
    ``data_storage_version`` (for a new dataset or an overwrite). Without ``version``, ``tag`` or
    ``asof`` each query reads the latest version.
    """

    #: the name Spark knows the source by
    provider: ClassVar[str] = "lance_table"
    #: the options of a source bound to one dataset (:func:`lance_table.spark.table_source`)
    bound_options: ClassVar[Mapping[str, str]] = {}
    #: the ``spark.lance_table.*`` storage options of the session that registered the source
    session_storage: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def name(cls) -> str:
        return cls.provider

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        given = {k.lower(): v for k, v in options.items()}
        self._catalog_create = not self.bound_options and bool(_CATALOG_KEYS & given.keys())
        if self.bound_options:
            given = {k: v for k, v in given.items() if k not in ("path", "location")}
            given = {**self.bound_options, **given}
        self._given = given
        self._opts = SourceOptions.parse(given, require_path=False)

    def _resolved(self, schema: Any = None) -> SourceOptions:
        """The options with the path: given, bound, or carried by a catalog table's schema.

        Raises:
            ValueError: there is no path.
        """
        if self._opts.path is not None:
            return self._opts
        location, carried = location_of(schema)
        if location is None:
            raise ValueError(f"{NO_PATH}. {NO_TABLE_LOCATION}")
        return SourceOptions.parse({**carried, **self._given, "path": location})

    def _storage_options(self, o: SourceOptions) -> dict[str, Any] | None:
        return merge_storage(self.session_storage, o.storage_options)

    def _open(self, o: SourceOptions) -> Any:
        """The dataset at the requested version (the latest unless one is pinned)."""
        import lance_table as lt

        version = o.tag if o.tag is not None else o.version
        assert o.path is not None
        return lt.dataset(o.path, version=version, asof=o.asof, storage_options=self._storage_options(o))

    def _columns(self, ds: Any, o: SourceOptions) -> list[str]:
        names = ds.schema.names
        if o.columns is None:
            return list(names)
        missing = [c for c in o.columns if c not in names and c not in SYSTEM_COLUMNS]
        if missing:
            raise SchemaError(f"columns {missing} are not in {o.path}; columns are {names}")
        return list(o.columns)

    def schema(self) -> Any:
        settle_worker()
        o = self._resolved()
        ds = self._open(o)
        fields = [
            ds.schema.field(c) if c in ds.schema.names else SYSTEM_COLUMNS[c] for c in self._columns(ds, o)
        ]
        if self._change_feed():
            from lance_table.spark.change_feed import change_fields

            fields += change_fields(ds.schema.names)
        schema = spark_schema(pa.schema(fields))
        if self._catalog_create:  # CREATE TABLE ... USING lance_table LOCATION: remember where
            assert o.path is not None
            if any(k.removeprefix(SPARK_OPTION_PREFIX) == "storage_options" for k in self._given):
                raise ValueError(NO_TABLE_STORAGE_OPTIONS)
            schema = with_location(schema, o.path, table_options(self._given))
        return schema

    def _change_feed(self) -> bool:
        """Whether the read is of the change feed (option ``readChangeFeed``; the other streaming
        options are checked when the stream starts)."""
        from lance_table.spark.options import ALIASES
        from lance_table.spark.streaming_options import StreamOptions

        flag = {k: v for k, v in self._given.items() if ALIASES.get(k, k) == "readchangefeed"}
        return StreamOptions.parse(flag).read_change_feed

    def _change_reader(self, o: SourceOptions, ds: Any, schema: Any) -> Any:
        """A batch read of the change feed, from ``startingVersion`` to ``endingVersion`` (the latest
        when not given), as Delta Lake's.

        Raises:
            ValueError: ``startingVersion`` is missing, or after ``endingVersion``.
            SchemaError: a column is not in the dataset.
        """
        from lance_table.spark.change_feed import CHANGE_COLUMNS, ChangeFeedReader
        from lance_table.spark.streaming_options import StreamOptions

        stream = StreamOptions.parse(self._given)
        last = stream.ending_version if stream.ending_version is not None else ds.version
        first = stream.starting_version
        if first is None:
            raise ValueError("a batch read with readChangeFeed needs the option startingVersion")
        first = last if first == -1 else first
        if first > last:
            raise ValueError(f"option startingVersion ({first}) is after endingVersion ({last})")
        data = [f.name for f in schema.fields if f.name not in CHANGE_COLUMNS]
        missing = [c for c in data if c not in ds.schema.names]
        if missing:
            raise SchemaError(f"columns {missing} are not in {o.path}; columns are {ds.schema.names}")
        assert o.path is not None
        return ChangeFeedReader(
            o.path,
            self._storage_options(o),
            first,
            last,
            pa.schema([ds.schema.field(c) for c in data]),
            spark_arrow_schema(schema),
            o.batch_size,
            o.max_rows_per_partition,
        )

    reader_class: type[LanceTableReader] = LanceTableReader

    def reader(self, schema: Any) -> LanceTableReader:
        # Spark plans a DataFrame's read once and reuses the plan in later queries: the reader
        # records when it planned, and tasks of a later query look for a newer version.
        settle_worker()
        o = self._resolved(schema)
        ds = self._open(o)
        if self._change_feed():
            return self._change_reader(o, ds, schema)
        names = ds.schema.names
        columns = [f.name for f in schema.fields]
        missing = [c for c in columns if c not in names and c not in SYSTEM_COLUMNS]
        if missing:
            raise SchemaError(f"columns {missing} are not in {o.path}; columns are {names}")
        pinned = o.version is not None or o.tag is not None or o.asof is not None
        assert o.path is not None
        return self.reader_class(
            o.path,
            self._storage_options(o),
            ds.manifest.fields,
            ds.manifest.schema_metadata,
            ds.manifest.fragments,
            columns,
            spark_arrow_schema(schema),
            o.filter,
            o.batch_size,
            o.max_rows_per_partition,
            dictionaries=ds.manifest.dictionaries,
            version=ds.version,
            planned_at=None if pinned else time.time(),
        )

    def writer(self, schema: Any, overwrite: bool) -> LanceTableWriter:
        settle_worker()
        o = self._opts  # never a path from the schema: a query's columns carry their source table's
        if o.path is None:
            raise ValueError(f"{NO_PATH}. {NO_TABLE_LOCATION}")
        return LanceTableWriter(
            o.path,
            self._storage_options(o),
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

        o, stream = self._opts, StreamOptions.parse(self._given)
        if o.path is None:
            raise ValueError(f"{NO_PATH}. {NO_TABLE_LOCATION}")
        if stream.merge_on is not None:
            from lance_table.spark.streaming_merge import LanceStreamMergeWriter

            if overwrite:
                raise ValueError(
                    "option 'merge_on' merges micro-batches: use it with the append or update output "
                    "mode, not complete"
                )
            return LanceStreamMergeWriter(
                o.path,
                self._storage_options(o),
                spark_arrow_schema(schema),
                stream.merge_on,
                query_id=stream.query_id,
                dedupe_lookback=stream.dedupe_lookback,
                checkpoint=stream.checkpoint,
                commit_message=o.commit_message,
            )
        return LanceStreamWriter(
            o.path,
            self._storage_options(o),
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

        o = self._resolved(schema)
        ds = self._open(o)
        names = ds.schema.names
        stream = StreamOptions.parse(self._given)
        reader_class = LanceStreamReader
        columns = [f.name for f in schema.fields]
        data = columns
        if stream.read_change_feed:
            from lance_table.spark.change_feed import CHANGE_COLUMNS, ChangeFeedStreamReader

            reader_class = ChangeFeedStreamReader
            data = [c for c in columns if c not in CHANGE_COLUMNS]
        missing = [c for c in data if c not in names]
        if missing:
            raise SchemaError(f"columns {missing} are not in {o.path}; columns are {names}")
        assert o.path is not None
        return reader_class(
            o.path,
            self._storage_options(o),
            ds.version,
            ds.manifest.fields,
            ds.manifest.schema_metadata,
            columns,
            spark_arrow_schema(schema),
            o.batch_size,
            o.max_rows_per_partition,
            stream,
            dictionaries=ds.manifest.dictionaries,
        )


class PushdownDataSource(LanceTableDataSource):
    """The same source with filter pushdown, installed by :func:`lance_table.spark.register`."""

    reader_class = PushdownReader
