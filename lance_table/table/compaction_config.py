"""Compaction defaults a dataset keeps in its config, as pylance 14 reads them: a key
``lance.compaction.<option>`` gives the option's value where the call leaves it None (an explicit
option wins, the config comes next, then the built-in default)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

PREFIX = "lance.compaction."


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


#: the options pylance reads from the config, with how each value is parsed
PARSERS: dict[str, Callable[[str], Any]] = {
    "target_rows_per_fragment": int,
    "max_rows_per_group": int,
    "max_bytes_per_file": int,
    "materialize_deletions": _bool,
    "materialize_deletions_threshold": float,
    "defer_index_remap": _bool,
    "batch_size": int,
    "compaction_mode": str,
    "binary_copy_read_batch_bytes": int,
    "max_source_fragments": int,
    "max_source_rows": int,
    "max_source_bytes": int,
    "data_storage_version": str,
}


def config_options(config: Mapping[str, str]) -> dict[str, Any]:
    """The compaction options a dataset's ``config`` sets (``lance.compaction.*`` keys).

    Raises:
        ValueError: a key's value does not parse (naming the key).
    """
    found: dict[str, Any] = {}
    for name, parse in PARSERS.items():
        text = config.get(PREFIX + name)
        if text is None:
            continue
        try:
            found[name] = parse(text.strip())
        except ValueError as exc:
            raise ValueError(f"dataset config {PREFIX}{name}={text!r} is not a valid value: {exc}") from None
    return found


def with_config(options: Mapping[str, Any], config: Mapping[str, str]) -> dict[str, Any]:
    """``options`` with each one left None (or absent) taken from the dataset's ``config``."""
    merged = dict(options)
    for name, value in config_options(config).items():
        if merged.get(name) is None:
            merged[name] = value
    return merged
