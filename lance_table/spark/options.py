"""Options of the ``lance_table`` Spark data source (keys are case-insensitive, values strings)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_ROWS_PER_PARTITION = 1024 * 1024
DEFAULT_BATCH_SIZE = 64 * 1024

# The options this source understands (lower case; Spark hands keys over case-insensitively).
KNOWN_OPTIONS = (
    "path",
    "version",
    "tag",
    "asof",
    "columns",
    "filter",
    "batch_size",
    "max_rows_per_partition",
    "storage_options",
    "max_rows_per_file",
    "commit_message",
    "data_storage_version",
    # Streaming (parsed by lance_table.spark.streaming_options).
    "streamingqueryid",
    "dedupe_lookback_versions",
    "checkpointlocation",
    "startingversion",
    "maxrowspertrigger",
    "skipchangecommits",
    "merge_on",
    # The change data feed (lance_table.spark.change_feed), streaming and batch.
    "readchangefeed",
    "endingversion",
)
# Table properties Spark itself passes for catalog tables (its reserved properties); not ours to check.
SPARK_RESERVED = frozenset(
    ("owner", "provider", "location", "comment", "external", "is_managed_location", "collation")
)
# Names Spark users bring from Delta Lake and the JVM Lance connector, and ours they mean.
ALIASES = {
    "versionasof": "version",
    "timestampasof": "asof",
    "lance.streaming.dedupe.lookback.versions": "dedupe_lookback_versions",
    "readchangedata": "readchangefeed",  # Delta Lake's first name of the option
}
# Spark copies a catalog table's OPTIONS into its properties under this prefix as well.
SPARK_OPTION_PREFIX = "option."
# Spark conf keys (``spark.lance_table.<name>``) that become storage options for every dataset.
CONF_PREFIX = "spark.lance_table."
NO_PATH = (
    "the lance_table data source needs a path: load(uri), save(uri), option('path', ...), "
    "or a catalog table made by lance_table.spark.create_table / attach"
)


def conf_storage_options(conf: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The storage options set in a Spark conf as ``spark.lance_table.<option>``."""
    items = conf.items() if isinstance(conf, Mapping) else conf
    n = len(CONF_PREFIX)
    return {k[n:]: v for k, v in items if k.startswith(CONF_PREFIX) and len(k) > n}


def task_storage_options() -> dict[str, str]:
    """The ``spark.lance_table.*`` storage options of the Spark task running this code (Spark hands a
    session's conf to its tasks as local properties), or none outside a task."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is installed with the spark extra
        return {}
    ctx = TaskContext.get()
    props = getattr(ctx, "_localProperties", None) if ctx is not None else None
    return conf_storage_options(props) if isinstance(props, Mapping) else {}


def merge_storage(*layers: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Storage options from several sources, later ones winning; None when there are none."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer:
            merged.update(layer)
    return merged or None


@dataclass(frozen=True)
class SourceOptions:
    path: str | None
    version: int | None = None
    tag: str | None = None
    asof: dt.datetime | None = None
    columns: tuple[str, ...] | None = None
    filter: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    max_rows_per_partition: int = DEFAULT_MAX_ROWS_PER_PARTITION
    storage_options: Mapping[str, Any] | None = None
    max_rows_per_file: int | None = None
    commit_message: str | None = None
    data_storage_version: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, require_path: bool = True) -> SourceOptions:
        """Parse Spark's string options.

        Raises:
            ValueError: a missing path (when ``require_path``), an unknown option (naming it and the
                known ones), an option given twice under two names, or a malformed value (naming the
                option).
        """
        opts: dict[str, str] = {}
        lowered = {k.lower(): v for k, v in options.items()}
        for key, value in options.items():
            name = key.lower()
            if name.startswith(SPARK_OPTION_PREFIX):
                name = name[len(SPARK_OPTION_PREFIX) :]
                if lowered.get(name) == value:
                    continue  # Spark's copy of a table option given plainly too
            name = ALIASES.get(name, name)
            if name in SPARK_RESERVED:
                continue
            if name not in KNOWN_OPTIONS:
                raise ValueError(
                    f"unknown option {key!r} of the lance_table data source; known options: "
                    f"{', '.join(KNOWN_OPTIONS)} (and versionAsOf, timestampAsOf)"
                )
            if name in opts:
                raise ValueError(f"option {name!r} is given twice (as {key!r} too)")
            opts[name] = value
        path = opts.get("path") or None
        if path is None and require_path:
            raise ValueError(NO_PATH)

        def integer(name: str, default: int | None) -> int | None:
            if name not in opts:
                return default
            try:
                value = int(opts[name])
            except ValueError:
                raise ValueError(f"option {name!r} must be an integer, got {opts[name]!r}") from None
            if value <= 0:
                raise ValueError(f"option {name!r} must be positive, got {value}")
            return value

        asof = None
        if "asof" in opts:
            try:
                asof = dt.datetime.fromisoformat(opts["asof"])
            except ValueError:
                raise ValueError(f"option 'asof' must be an ISO timestamp, got {opts['asof']!r}") from None
        storage = None
        if "storage_options" in opts:
            try:
                storage = json.loads(opts["storage_options"])
            except json.JSONDecodeError as exc:
                raise ValueError(f"option 'storage_options' must be a JSON object: {exc}") from None
            if not isinstance(storage, dict):
                raise ValueError("option 'storage_options' must be a JSON object")
        columns = None
        if opts.get("columns"):
            columns = tuple(c.strip() for c in opts["columns"].split(",") if c.strip())
        if sum(x is not None for x in (opts.get("version"), opts.get("tag"), asof)) > 1:
            raise ValueError("pass at most one of the options 'version', 'tag' and 'asof'")
        return cls(
            path=path,
            version=integer("version", None),
            tag=opts.get("tag"),
            asof=asof,
            columns=columns,
            filter=opts.get("filter") or None,
            batch_size=integer("batch_size", DEFAULT_BATCH_SIZE) or DEFAULT_BATCH_SIZE,
            max_rows_per_partition=integer("max_rows_per_partition", DEFAULT_MAX_ROWS_PER_PARTITION)
            or DEFAULT_MAX_ROWS_PER_PARTITION,
            storage_options=storage,
            max_rows_per_file=integer("max_rows_per_file", None),
            commit_message=opts.get("commit_message") or None,
            data_storage_version=opts.get("data_storage_version") or None,
        )


#: column metadata keys of a table created by ``CREATE TABLE ... USING lance_table LOCATION``
LOCATION_KEY = "lance_table.location"
OPTIONS_KEY = "lance_table.options"
# Options that are not the table's own reading choices (credentials are never put in a schema).
_NOT_CARRIED = frozenset(("path", "storage_options"))


def table_options(options: Mapping[str, str]) -> dict[str, str]:
    """The reading options of a catalog table's ``OPTIONS`` worth carrying with its schema."""
    out: dict[str, str] = {}
    for key, value in options.items():
        name = key.lower()
        if name.startswith(SPARK_OPTION_PREFIX):
            name = name[len(SPARK_OPTION_PREFIX) :]
        if name in SPARK_RESERVED or name in _NOT_CARRIED:
            continue
        out[name] = value
    return out


def with_location(schema: Any, location: str, options: Mapping[str, str]) -> Any:
    """``schema`` with the table's location and options in its first column's metadata."""
    from pyspark.sql.types import StructField, StructType

    if not schema.fields:
        return schema
    first = schema.fields[0]
    meta = dict(first.metadata or {})
    meta[LOCATION_KEY] = location
    if options:
        meta[OPTIONS_KEY] = json.dumps(dict(options), sort_keys=True)
    return StructType([StructField(first.name, first.dataType, first.nullable, meta), *schema.fields[1:]])


def location_of(schema: Any) -> tuple[str | None, dict[str, str]]:
    """The location and options a catalog table's schema carries (see :func:`with_location`)."""
    if schema is None or not schema.fields:
        return None, {}
    meta = schema.fields[0].metadata or {}
    location = meta.get(LOCATION_KEY)
    options = json.loads(meta[OPTIONS_KEY]) if OPTIONS_KEY in meta else {}
    return location, options
