"""Automatic cleanup as pylance runs it: the config keys either library writes, and the versions
left after commits by either library, compared on copies of one history."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.table.operations.auto_cleanup import format_duration, parse_duration

pytestmark = pytest.mark.interop

_TABLE = pa.table({"a": [1, 2, 3]})


def _versions(uri: Path) -> list[int]:
    return [v["version"] for v in lance.dataset(uri).versions()]


@pytest.mark.parametrize("seconds", [0, 1, 59, 3661, 1_209_600, 31_557_600, 40_000_000, 68_555_354])
def test_write_dataset_stores_pylances_config(tmp_path: Path, seconds: int) -> None:
    options = {"interval": 3, "older_than_seconds": seconds}
    ours = lt.write_dataset(_TABLE, tmp_path / "ours", auto_cleanup_options=options).config()
    theirs = lance.write_dataset(_TABLE, tmp_path / "pylance", auto_cleanup_options=options).config()
    assert ours == theirs
    assert parse_duration(ours["lance.auto_cleanup.older_than"]) == dt.timedelta(seconds=seconds)


def test_defaults_and_only_new_datasets(tmp_path: Path) -> None:
    for lib, name in ((lt, "ours"), (lance, "pylance")):
        lib.write_dataset(_TABLE, tmp_path / name)
        # an existing dataset ignores the options, as in pylance
        lib.write_dataset(_TABLE, tmp_path / name, mode="append", auto_cleanup_options={"interval": 1})
        lib.write_dataset(_TABLE, tmp_path / f"{name}-new", auto_cleanup_options={})
    assert lt.dataset(tmp_path / "ours").config() == lance.dataset(tmp_path / "pylance").config() == {}
    assert lt.dataset(tmp_path / "ours-new").config() == lance.dataset(tmp_path / "pylance-new").config()
    assert lt.dataset(tmp_path / "ours-new").config()["lance.auto_cleanup.older_than"] == "14days"


@pytest.mark.parametrize(
    ("first", "then"), [(lt, lance), (lance, lt)], ids=["ours-then-pylance", "pylance-then-ours"]
)
def test_cleanup_runs_every_interval_like_pylance(tmp_path: Path, first, then) -> None:
    """The library that enables auto cleanup and the one that commits afterwards differ: the
    versions left are pylance's in both orders (cleanup judges from the version before the commit)."""
    results = {}
    for label, committer in (("mixed", then), ("pylance", lance)):
        uri = tmp_path / label
        ds = first.write_dataset(_TABLE, uri)
        ds.optimize.enable_auto_cleanup({"interval": 3, "older_than_seconds": 0})  # version 2
        left = []
        for _ in range(5):  # versions 3..7: cleanups after 3 and 6
            committer.write_dataset(_TABLE, uri, mode="append")
            left.append(_versions(uri))
        committer.dataset(uri).optimize.disable_auto_cleanup()  # version 8
        for _ in range(2):
            committer.write_dataset(_TABLE, uri, mode="append")
        left.append(_versions(uri))
        assert lt.dataset(uri).count_rows() == lance.dataset(uri).count_rows() == 8 * 3
        results[label] = left
    assert results["mixed"] == results["pylance"]
    assert results["pylance"][1] == [2, 3, 4]
    assert results["pylance"][-1] == [5, 6, 7, 8, 9, 10]


def test_tagged_old_version_stops_the_cleanup_as_in_pylance(tmp_path: Path) -> None:
    results = {}
    for lib in (lt, lance):
        uri = tmp_path / lib.__name__
        ds = lib.write_dataset(_TABLE, uri, auto_cleanup_options={"interval": 4, "older_than_seconds": 0})
        ds.tags.create("keep", 1)
        for _ in range(3):
            lib.write_dataset(_TABLE, uri, mode="append")
        results[lib] = _versions(uri)
    assert results[lt] == results[lance]


def test_bad_config_is_logged_and_the_commit_lands(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ds = lt.write_dataset(_TABLE, tmp_path)
    ds.update_config({"lance.auto_cleanup.interval": "1", "lance.auto_cleanup.older_than": "soon"})
    lt.write_dataset(_TABLE, tmp_path, mode="append")
    assert _versions(tmp_path) == [1, 2, 3]
    assert "automatic cleanup" in caplog.text


def test_durations() -> None:
    assert format_duration(90061) == "1day 1h 1m 1s"
    for text, seconds in [("1ms", 0.001), ("2h 30min", 9000), ("1week", 604800), ("3 days", 259200)]:
        assert parse_duration(text) == dt.timedelta(seconds=seconds)
    for bad in ("", "10", "5 parsecs", "1h x"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    with pytest.raises(ValueError):
        lt.write_dataset(_TABLE, "memory://x", auto_cleanup_options={"interval": 0})
    with pytest.raises(TypeError):
        lt.write_dataset(_TABLE, "memory://x", auto_cleanup_options={"interval": "1"})
