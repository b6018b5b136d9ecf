"""Parsing the streaming sink's and source's options (no Spark session needed)."""

from __future__ import annotations

import pytest

from lance_table.spark.options import SourceOptions
from lance_table.spark.streaming_options import DEFAULT_DEDUPE_LOOKBACK, StreamOptions


def test_streaming_options_with_spark_users_names() -> None:
    given = {
        "path": "/x",
        "streamingQueryId": " orders-v1 ",
        "lance.streaming.dedupe.lookback.versions": "500",
        "checkpointLocation": "/ck",
        "StartingVersion": "7",
        "maxRowsPerTrigger": "1000",
        "skipChangeCommits": "TRUE",
    }
    assert SourceOptions.parse(given).path == "/x"  # the batch parser knows the streaming names
    assert StreamOptions.parse(given) == StreamOptions(
        query_id="orders-v1",
        dedupe_lookback=500,
        checkpoint="/ck",
        starting_version=7,
        max_rows_per_trigger=1000,
        skip_change_commits=True,
    )
    assert StreamOptions.parse({"startingVersion": "latest"}).starting_version == -1
    assert StreamOptions.parse({"merge_on": " id, region "}).merge_on == ("id", "region")
    defaults = StreamOptions.parse({"path": "/x"})
    assert defaults.query_id is None and defaults.dedupe_lookback == DEFAULT_DEDUPE_LOOKBACK
    assert defaults.starting_version is None and not defaults.skip_change_commits
    assert defaults.merge_on is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxRowsPerTrigger": "0"}, "'maxRowsPerTrigger' must be positive"),
        ({"maxRowsPerTrigger": "many"}, "'maxRowsPerTrigger' must be an integer"),
        ({"startingVersion": "first"}, "'startingVersion' must be an integer"),
        ({"startingVersion": "-2"}, "'startingVersion' must be positive"),
        ({"skipChangeCommits": "yes"}, "'skipChangeCommits' must be true or false"),
        ({"streamingQueryId": " "}, "'streamingQueryId' must not be empty"),
        ({"lance.streaming.dedupe.lookback.versions": "20000"}, "at most 10000"),
        ({"merge_on": " , "}, "'merge_on' must name at least one key column"),
    ],
)
def test_bad_streaming_options_name_themselves(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StreamOptions.parse(options)
