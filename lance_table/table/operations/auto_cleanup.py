"""Automatic cleanup, as pylance runs it: a dataset whose config has ``lance.auto_cleanup.interval``
has its old versions cleaned up after every commit of a version that is a multiple of the interval.

The keys live in the manifest config (so pylance and lance_table writers both honour them):
``lance.auto_cleanup.interval`` (versions), ``lance.auto_cleanup.older_than`` (a duration in
pylance's (humantime's) notation, ``"14days"``, ``"1h 30m"``, ``"10s"``) and, optionally,
``lance.auto_cleanup.retain_versions``. As in pylance, the cleanup judges from the version before
the commit (so that version and the new one stay), never fails the commit (an error is logged),
and ``write_dataset(auto_cleanup_options=...)`` sets the keys only when it creates the dataset.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from typing import Any, TypedDict

from lance_table.format.manifest import Manifest
from lance_table.storage import Storage

log = logging.getLogger(__name__)

INTERVAL_KEY = "lance.auto_cleanup.interval"
OLDER_THAN_KEY = "lance.auto_cleanup.older_than"
RETAIN_VERSIONS_KEY = "lance.auto_cleanup.retain_versions"
DEFAULT_INTERVAL = 20
DEFAULT_OLDER_THAN_SECONDS = 14 * 24 * 3600


class AutoCleanupConfig(TypedDict):
    """pylance's ``AutoCleanupConfig``: clean up every ``interval`` versions, removing versions
    older than ``older_than_seconds``.

    Example:
        ```python
        config = lt.AutoCleanupConfig(interval=20, older_than_seconds=3600)
        auto = lt.write_dataset(table, f"{tmp}/auto", auto_cleanup_options=config)
        print(auto.config())  # lance.auto_cleanup.* keys
        ```
    """

    interval: int
    older_than_seconds: int


# humantime's units, in seconds: a year is 365.25 days and a month a twelfth of it
_YEAR = 31_557_600
_MONTH = 2_630_016
_DAY = 86_400
_UNITS: dict[str, float] = {}
for _names, _seconds in (
    (("nsec", "ns"), 1e-9),
    (("usec", "us", "µs"), 1e-6),
    (("msec", "ms"), 1e-3),
    (("seconds", "second", "sec", "secs", "s"), 1),
    (("minutes", "minute", "min", "mins", "m"), 60),
    (("hours", "hour", "hr", "hrs", "h"), 3600),
    (("days", "day", "d"), _DAY),
    (("weeks", "week", "w"), 7 * _DAY),
    (("months", "month", "M"), _MONTH),
    (("years", "year", "y"), _YEAR),
):
    for _name in _names:
        _UNITS[_name] = _seconds
_TOKEN = re.compile(r"\s*(\d+)\s*([A-Za-zµ]+)")


def format_duration(seconds: int) -> str:
    """``seconds`` as pylance writes a duration (``"14days"``, ``"1year 3months 6days 9h 25m 52s"``).

    Raises:
        ValueError: ``seconds`` is negative.
    """
    if seconds < 0:
        raise ValueError(f"older_than_seconds must not be negative, got {seconds}")
    parts = []
    rest = int(seconds)
    for unit, size in (("year", _YEAR), ("month", _MONTH), ("day", _DAY)):
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n}{unit}{'s' if n > 1 else ''}")
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n}{unit}")
    return " ".join(parts) or "0s"


def parse_duration(text: str) -> dt.timedelta:
    """A duration in pylance's notation (``"1ms"``, ``"10s"``, ``"2h 30min"``, ``"14days"``).

    Raises:
        ValueError: the text is not such a duration.
    """
    total, at = 0.0, 0
    stripped = text.strip()
    while at < len(stripped):
        match = _TOKEN.match(stripped, at)
        if match is None or match.group(2) not in _UNITS:
            raise ValueError(f"{text!r} is not a duration (a number and a unit: '10s', '14days')")
        total += int(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    if not stripped:
        raise ValueError("an empty string is not a duration")
    return dt.timedelta(seconds=total)


def config_values(options: Mapping[str, Any]) -> dict[str, str]:
    """The config keys ``write_dataset(auto_cleanup_options=...)`` stores for a new dataset
    (pylance's defaults: every 20 versions, versions older than 14 days).

    Raises:
        ValueError: a value is negative, or the interval is not positive.
        TypeError: ``options`` is not a mapping, or a value is not an integer.
    """
    if not isinstance(options, Mapping):
        raise TypeError(f"auto_cleanup_options must be a dict, not {type(options).__name__}")
    interval = options.get("interval", DEFAULT_INTERVAL)
    older = options.get("older_than_seconds", DEFAULT_OLDER_THAN_SECONDS)
    for name, value in (("interval", interval), ("older_than_seconds", older)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"auto_cleanup_options[{name!r}] must be an int, not {value!r}")
    if interval <= 0:
        raise ValueError(f"auto_cleanup_options['interval'] must be positive, got {interval}")
    return {INTERVAL_KEY: str(interval), OLDER_THAN_KEY: format_duration(older)}


def enable_values(config: Mapping[str, Any]) -> dict[str, str]:
    """The config keys ``optimize.enable_auto_cleanup(config)`` sets (as pylance: the interval,
    and the age in seconds).

    Raises:
        KeyError: ``interval`` or ``older_than_seconds`` is missing.
    """
    return {INTERVAL_KEY: str(config["interval"]), OLDER_THAN_KEY: f"{config['older_than_seconds']}s"}


def run_after_commit(storage: Storage, manifest: Manifest) -> None:
    """The cleanup pylance runs after committing ``manifest``, if its config asks for one now:
    versions below the previous one (and below its ``retain_versions`` newest), older than
    ``older_than``. As in pylance, a tagged version among them stops the cleanup. A failure is
    logged, never raised: the commit has landed."""
    interval = manifest.config.get(INTERVAL_KEY)
    if interval is None:
        return
    try:
        _run(storage, manifest, interval)
    except Exception as exc:  # the commit landed; a failed cleanup is retried at the next interval
        log.error("automatic cleanup of %s after version %s failed: %s", storage.uri, manifest.version, exc)


def _run(storage: Storage, manifest: Manifest, interval: str) -> None:
    from lance_table.table.operations.cleanup import cleanup_old_versions

    if int(interval) <= 0:
        raise ValueError(f"{INTERVAL_KEY} must be positive, got {interval!r}")
    if manifest.version % int(interval):
        return
    older = manifest.config.get(OLDER_THAN_KEY)
    retain = manifest.config.get(RETAIN_VERSIONS_KEY)
    # judged from the version before this commit, as pylance: it and its newer ones stay
    below = manifest.version - 1 - (int(retain) - 1 if retain is not None else 0)
    if below <= 1:
        return
    cleanup_old_versions(
        storage,
        older_than=None if older is None else parse_duration(older),
        only_versions=range(1, below),
    )
