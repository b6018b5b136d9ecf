"""pylance's JSON of distributed compaction objects (``CompactionPlan.json()``,
``CompactionTask.json()``, ``RewriteResult.json()`` and their ``from_json``): a plan made by one
library can be sent as JSON to workers of the other, and their results back to the driver.

The JSON is pylance's serde form: fragments as pylance writes them inside these objects (keys
whose value is null left out), and the options as pylance's full ``CompactOptions`` record, with
every field its ``from_json`` requires (defaults filled in from this library's constants).
"""

from __future__ import annotations

import json as _json
from collections.abc import Mapping
from typing import Any

from lance_table.errors import FragmentMetadataError
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.operations.compaction import (
    DEFAULT_MATERIALIZE_DELETIONS,
    DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD,
    DEFAULT_MAX_ROWS_PER_GROUP,
    DEFAULT_TARGET_ROWS,
    CompactionMetrics,
)

# pylance's defaults of the option fields lance_table has no constant for
DEFAULT_BINARY_COPY_READ_BATCH_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_OVERLAYS_PER_FRAGMENT = 10
# compaction_mode: Python's names <-> pylance's serde variant names
_MODES = {"reencode": "Reencode", "try_binary_copy": "TryBinaryCopy", "force_binary_copy": "ForceBinaryCopy"}
_MODE_NAMES = {v: k for k, v in _MODES.items()}
# the options pylance serializes that lance_table's option dictionaries carry
_CARRIED = (
    "target_rows_per_fragment",
    "max_rows_per_group",
    "max_bytes_per_file",
    "materialize_deletions",
    "materialize_deletions_threshold",
    "num_threads",
    "batch_size",
    "io_buffer_size",
    "defer_index_remap",
    "compaction_mode",
    "binary_copy_read_batch_bytes",
    "max_source_fragments",
    "max_source_rows",
    "max_source_bytes",
    "excluded_fragment_ids",
    "data_storage_version",
)


def options_json(options: Mapping[str, Any], data_storage_version: str | None) -> dict[str, Any]:
    """pylance's ``options`` record of compaction ``options`` (a ``CompactionOptions`` dict)."""

    def get(name: str, default: Any) -> Any:
        value = options.get(name)
        return default if value is None else value

    mode = options.get("compaction_mode")
    return {
        "target_rows_per_fragment": get("target_rows_per_fragment", DEFAULT_TARGET_ROWS),
        "max_rows_per_group": get("max_rows_per_group", DEFAULT_MAX_ROWS_PER_GROUP),
        "max_bytes_per_file": options.get("max_bytes_per_file"),
        "materialize_deletions": get("materialize_deletions", DEFAULT_MATERIALIZE_DELETIONS),
        "materialize_deletions_threshold": get(
            "materialize_deletions_threshold", DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD
        ),
        "num_threads": options.get("num_threads"),
        "batch_size": options.get("batch_size"),
        "io_buffer_size": options.get("io_buffer_size"),
        "defer_index_remap": bool(options.get("defer_index_remap")),
        "index_remap_mode": "Direct",
        "compaction_mode": None if mode is None else _MODES.get(mode, mode),
        "enable_binary_copy": False,
        "enable_binary_copy_force": False,
        "binary_copy_read_batch_bytes": get(
            "binary_copy_read_batch_bytes", DEFAULT_BINARY_COPY_READ_BATCH_BYTES
        ),
        "max_source_fragments": options.get("max_source_fragments"),
        "max_source_rows": options.get("max_source_rows"),
        "max_source_bytes": options.get("max_source_bytes"),
        "excluded_fragment_ids": list(options.get("excluded_fragment_ids") or []),
        "max_overlays_per_fragment": DEFAULT_MAX_OVERLAYS_PER_FRAGMENT,
        "data_storage_version": get("data_storage_version", data_storage_version),
        "has_eager_remappable_index": None,
    }


def options_from_json(record: Mapping[str, Any]) -> dict[str, Any]:
    """The ``CompactionOptions`` dict of pylance's ``options`` record (null and empty values, and
    pylance's internal fields, left out)."""
    out = {k: record[k] for k in _CARRIED if record.get(k) not in (None, [])}
    if "compaction_mode" in out:
        out["compaction_mode"] = _MODE_NAMES.get(out["compaction_mode"], out["compaction_mode"])
    if out.get("defer_index_remap") is False:
        del out["defer_index_remap"]
    return out


def fragment_json(meta: FragmentMetadata) -> dict[str, Any]:
    """A fragment as pylance writes it inside these objects: its keys in pylance's order, the
    null ones (and an empty overlay list) left out."""
    full = meta.to_json()
    files = [
        {"path": f.pop("path"), **f}  # (pylance puts the path first)
        for f in (dict(f) for f in full.pop("files"))
    ]
    ordered = {"id": full.pop("id"), "files": files, "deletion_file": full.pop("deletion_file")}
    ordered["physical_rows"] = full.pop("physical_rows")
    ordered.update(full)
    return {k: v for k, v in ordered.items() if v is not None and not (k == "overlays" and v == [])}


def fragments_from_json(items: Any, what: str) -> list[FragmentMetadata]:
    """The fragments of a JSON list.

    Raises:
        FragmentMetadataError: ``items`` is not a list of fragment records.
    """
    if not isinstance(items, list):
        raise FragmentMetadataError(f"{what} must be a list of fragments, not {type(items).__name__}")
    try:
        return [FragmentMetadata.from_json(item) for item in items]
    except (KeyError, TypeError, ValueError) as exc:
        raise FragmentMetadataError(f"{what} holds a record that is not fragment metadata: {exc!r}") from None


def load(text: str | bytes, what: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The JSON object ``text`` (of a ``what``), which must hold ``keys``.

    Raises:
        FragmentMetadataError: not JSON, not an object, or a key is missing (a ValueError, as
            pylance raises ``Could not load ...``).
    """
    try:
        data = _json.loads(text)
    except (TypeError, ValueError) as exc:
        raise FragmentMetadataError(f"Could not load {what} due to error: {exc}") from None
    if not isinstance(data, dict):
        raise FragmentMetadataError(f"Could not load {what}: the JSON is not an object")
    missing = [k for k in keys if k not in data]
    if missing:
        raise FragmentMetadataError(f"Could not load {what} due to error: missing field `{missing[0]}`")
    return data


def metrics_json(metrics: CompactionMetrics) -> dict[str, int]:
    """pylance's ``metrics`` record."""
    return {
        "fragments_removed": metrics.fragments_removed,
        "fragments_added": metrics.fragments_added,
        "files_removed": metrics.files_removed,
        "files_added": metrics.files_added,
    }


def metrics_from_json(record: Any) -> CompactionMetrics:
    """The metrics of pylance's ``metrics`` record.

    Raises:
        FragmentMetadataError: it is not such a record.
    """
    try:
        return CompactionMetrics(**{k: int(record[k]) for k in metrics_json(CompactionMetrics())})
    except (KeyError, TypeError, ValueError) as exc:
        raise FragmentMetadataError(f"Could not load RewriteResult metrics: {exc!r}") from None
