"""Options of the streaming sink and source (``writeStream`` / ``readStream``), beside the batch ones.

Keys are case-insensitive and values strings, as Spark hands them over; the names of the JVM
connector (``streamingQueryId``) and of Delta Lake (``startingVersion``, ``maxRowsPerTrigger``,
``skipChangeCommits``, ``readChangeFeed``, ``endingVersion``) are used as Spark users know them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lance_table.spark.options import ALIASES

# The transaction properties a streaming commit carries (the JVM connector's keys).
QUERY_ID_KEY = "lance.streaming.queryId"
EPOCH_ID_KEY = "lance.streaming.epochId"
# How many recent versions the sink searches for an epoch it already committed (as the JVM connector).
DEFAULT_DEDUPE_LOOKBACK = 100
MAX_DEDUPE_LOOKBACK = 10_000


@dataclass(frozen=True)
class StreamOptions:
    """The streaming options (the batch ones are :class:`lance_table.spark.options.SourceOptions`).

    Attributes:
        query_id: ``streamingQueryId``, the sink's idempotency key; None: Spark's own query id
            (stable across restarts from one checkpoint).
        dedupe_lookback: how many recent versions the sink searches for an epoch already committed.
        checkpoint: ``checkpointLocation`` as given to the query (None when set in the Spark conf).
        starting_version: ``startingVersion``: the first version whose appended rows the source
            yields; None: the table as of the query's start, then every later append; -1: "latest",
            only versions after the query's start.
        max_rows_per_trigger: ``maxRowsPerTrigger``: at most this many rows in one micro-batch.
        skip_change_commits: ``skipChangeCommits``: pass over versions that delete, update or
            rewrite rows instead of failing.
        merge_on: ``merge_on``: the key columns (comma-separated) the sink merges each
            micro-batch on (update matched rows, insert the others); None: the sink appends.
        read_change_feed: ``readChangeFeed`` (or Delta's ``readChangeData``): the source yields
            the change rows of each version (``_change_type``, ``_commit_version``,
            ``_commit_timestamp`` after the data columns; see :mod:`lance_table.table.changes`).
        ending_version: ``endingVersion``: the last version a batch read of the change feed
            covers; None: the latest.
    """

    query_id: str | None = None
    dedupe_lookback: int = DEFAULT_DEDUPE_LOOKBACK
    checkpoint: str | None = None
    starting_version: int | None = None
    max_rows_per_trigger: int | None = None
    skip_change_commits: bool = False
    merge_on: tuple[str, ...] | None = None
    read_change_feed: bool = False
    ending_version: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        """Parse the streaming options out of Spark's options (others are left to the batch parser).

        Raises:
            ValueError: a malformed value, naming the option.
        """
        opts = {ALIASES.get(k.lower(), k.lower()): v for k, v in options.items()}

        def positive(name: str, spelled: str, upper: int | None = None) -> int | None:
            if name not in opts:
                return None
            try:
                value = int(opts[name])
            except ValueError:
                raise ValueError(f"option {spelled!r} must be an integer, got {opts[name]!r}") from None
            if value <= 0 or (upper is not None and value > upper):
                bound = f" and at most {upper}" if upper is not None else ""
                raise ValueError(f"option {spelled!r} must be positive{bound}, got {value}")
            return value

        starting: int | None = None
        raw = opts.get("startingversion")
        if raw is not None:
            if raw.strip().lower() == "latest":
                starting = -1
            else:
                starting = positive("startingversion", "startingVersion")

        def flag(name: str, spelled: str) -> bool:
            value = opts.get(name, "false").strip().lower()
            if value not in ("true", "false"):
                raise ValueError(f"option {spelled!r} must be true or false, got {value!r}")
            return value == "true"

        query_id = opts.get("streamingqueryid")
        if query_id is not None and not query_id.strip():
            raise ValueError("option 'streamingQueryId' must not be empty")
        merge_on = None
        if "merge_on" in opts:
            merge_on = tuple(c.strip() for c in opts["merge_on"].split(",") if c.strip())
            if not merge_on:
                raise ValueError("option 'merge_on' must name at least one key column")
        return cls(
            query_id=query_id.strip() if query_id else None,
            dedupe_lookback=positive(
                "dedupe_lookback_versions", "lance.streaming.dedupe.lookback.versions", MAX_DEDUPE_LOOKBACK
            )
            or DEFAULT_DEDUPE_LOOKBACK,
            checkpoint=opts.get("checkpointlocation") or None,
            starting_version=starting,
            max_rows_per_trigger=positive("maxrowspertrigger", "maxRowsPerTrigger"),
            skip_change_commits=flag("skipchangecommits", "skipChangeCommits"),
            merge_on=merge_on,
            read_change_feed=flag("readchangefeed", "readChangeFeed"),
            ending_version=positive("endingversion", "endingVersion"),
        )
