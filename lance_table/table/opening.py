"""Opening a dataset as pylance opens it: its options (the engine-tuning ones accepted as no-ops, the
ones that would change the result refused by name), and a handle's pickled state.

A handle pickles as its URI, storage options, version, manifest (the bytes of a manifest file) and
naming scheme, so the process that unpickles it opens exactly that version without listing the
store (pylance pickles ``serialized_manifest()`` for the same reason). The commit lock, a callable
of the process that made it, is not pickled (as in pylance).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from typing import Any

from lance_table.errors import UnsupportedOptionError, VersionNotFoundError
from lance_table.format.manifest_file import decode_manifest_file, encode_manifest_file
from lance_table.storage import open_storage
from lance_table.table.commit import CommitLock, CommitOptions
from lance_table.table.snapshot import Snapshot, load

#: pylance's options of ``dataset()``/``LanceDataset(...)`` that only tune its engine (caches, I/O
#: sizes, sessions): accepted and ignored, they change no result.
READ_ENGINE_OPTIONS = (
    "block_size",
    "index_cache_size",
    "metadata_cache_size",
    "metadata_cache_size_bytes",
    "index_cache_size_bytes",
    "read_params",
    "session",
)
#: pylance's read options that would change what the handle returns: refused unless left unset.
READ_REFUSED_OPTIONS = ("namespace_client", "table_id")


def scan_defaults(options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """pylance's ``default_scan_options``: a dict of scan options (checked by each scan), or None.

    Raises:
        TypeError: not a dict.
    """
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(f"default_scan_options must be a dict of scan options, not {type(options).__name__}")
    return dict(options)


def refuse(call: str, given: Mapping[str, Any], unset: Mapping[str, Any] | None = None) -> None:
    """Raise for the first option in ``given`` whose value is not its unset value (None, or the
    value in ``unset``).

    Raises:
        UnsupportedOptionError: naming the option.
    """
    for name, value in given.items():
        if value != (unset or {}).get(name):
            raise UnsupportedOptionError(call, name)


def open_snapshot(
    uri: str | os.PathLike[str],
    version: int | str | None = None,
    asof: dt.datetime | str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    commit_lock: CommitLock | None = None,
    unsafe_commit: bool = False,
    serialized_manifest: bytes | None = None,
    base_store_params: Mapping[str, Mapping[str, Any]] | None = None,
) -> Snapshot:
    """The snapshot ``dataset()`` opens: a version number, a tag, the version current at ``asof``
    (a naive datetime is local time, as in pylance; an aware one is converted; an ISO string),
    the latest, or the version ``serialized_manifest`` (from :func:`handle_state`) holds, read
    without touching the store's listing.

    Raises:
        DatasetNotFoundError: there is no dataset at ``uri``.
        VersionNotFoundError: the version or time does not resolve, or ``serialized_manifest`` holds
            another version than ``version``.
        TagError: the tag does not exist.
        StorageOptionsError: a storage option is unknown, unsafe or has a bad value.
    """
    storage = open_storage(uri, storage_options, base_store_params)
    options = CommitOptions(commit_lock=commit_lock, unsafe_commit=unsafe_commit)
    if serialized_manifest is not None:
        return _from_manifest(storage, serialized_manifest, version, None, options)
    return load(storage, version, _as_datetime(asof), options)


def _as_datetime(asof: dt.datetime | str | None) -> dt.datetime | None:
    """pylance's ``asof`` forms as a datetime (a naive one is local time): a datetime (pandas
    Timestamps are) or an ISO string.

    Raises:
        ValueError: the string is not a time.
        TypeError: another type (as pylance).
    """
    if asof is None or isinstance(asof, dt.datetime):
        return asof
    if isinstance(asof, str):
        try:
            return dt.datetime.fromisoformat(asof)
        except ValueError:
            raise ValueError(f"asof={asof!r} is not an ISO time ('YYYY-MM-DD HH:MM:SS')") from None
    raise TypeError(f"asof must be a datetime or an ISO string, not {type(asof).__name__}")


def _from_manifest(
    storage: Any, data: bytes, version: int | str | None, scheme: str | None, options: CommitOptions
) -> Snapshot:
    manifest = decode_manifest_file(data, f"{storage.uri} (serialized manifest)").manifest
    if version is not None and version != manifest.version:
        raise VersionNotFoundError(
            f"the serialized manifest of {storage.uri} is version {manifest.version}, not {version!r}"
        )
    return Snapshot(storage, manifest, scheme, options)


def handle_state(snapshot: Snapshot) -> dict[str, Any]:
    """What a pickled handle carries: URI, storage options, version, manifest bytes, naming
    scheme, and the commit settings that are plain values."""
    return {
        "uri": snapshot.uri,
        "storage_options": dict(snapshot.storage.storage_options),
        "base_store_params": dict(snapshot.storage.base_store_params),
        "version": snapshot.version,
        "manifest": encode_manifest_file(snapshot.manifest, b""),
        "scheme": snapshot.scheme,
        "unsafe_commit": snapshot.commit_options.unsafe_commit,
        "max_retries": snapshot.commit_options.max_retries,
    }


def snapshot_of_state(state: Mapping[str, Any]) -> Snapshot:
    """The snapshot a pickled handle held, opened without listing the store.

    Raises:
        StorageOptionsError: the storage options are refused here.
        CorruptFileError: the manifest bytes are damaged.
    """
    storage = open_storage(state["uri"], state["storage_options"], state.get("base_store_params"))
    options = CommitOptions(unsafe_commit=state["unsafe_commit"], max_retries=state["max_retries"])
    return _from_manifest(storage, state["manifest"], state["version"], state["scheme"], options)
