"""Options of the ``lance_table`` Spark data source (keys are case-insensitive, values strings)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
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
}


@dataclass(frozen=True)
class SourceOptions:
    path: str
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
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Parse Spark's string options.

        Raises:
            ValueError: a missing path, an unknown option (naming it and the known ones), an option
                given twice under two names, or a malformed value (naming the option).
        """
        opts: dict[str, str] = {}
        for key, value in options.items():
            name = ALIASES.get(key.lower(), key.lower())
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
        path = opts.get("path")
        if not path:
            raise ValueError(
                "the lance_table data source needs a path: load(uri), save(uri) or option('path', ...)"
            )

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
