"""The files of a dataset, as pylance 14 lists them: ``all_files()`` (every file physically under the
dataset's root) and ``tracked_files()`` (every file some version's manifest references), both as
Arrow streams in pylance's schemas. Comparing the two finds files no version needs (cleanup's
business) and files a version needs that are gone.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable

import pyarrow as pa

from lance_table._parallel import METADATA, map_on
from lance_table.format import paths
from lance_table.format.bases import BasePath, base_paths
from lance_table.format.manifest import Manifest
from lance_table.storage import Entry, LocalStorage, Storage
from lance_table.table import versions
from lance_table.table.base_storage import data_dir
from lance_table.table.indices import decode_section

_BASE = pa.field("base_uri", pa.dictionary(pa.int32(), pa.string()), nullable=False)
_PATH = pa.field("path", pa.string(), nullable=False)
ALL_FILES_SCHEMA = pa.schema(
    [
        _BASE,
        _PATH,
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("last_modified", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
TRACKED_FILES_SCHEMA = pa.schema(
    [
        pa.field("version", pa.int64(), nullable=False),
        _BASE,
        _PATH,
        pa.field("type", pa.dictionary(pa.int8(), pa.string()), nullable=False),
    ]
)
MANIFEST, TRANSACTION, DATA, DELETION, INDEX = (
    "manifest",
    "transaction file",
    "data file",
    "deletion file",
    "index file",
)


def _dictionary(values: list[str], index: pa.DataType) -> pa.Array:
    return pa.array(values, pa.string()).dictionary_encode().cast(pa.dictionary(index, pa.string()))


def _modified_us(storage: Storage, entry: Entry) -> int:
    """A file's modification time in whole microseconds (truncated from the nanoseconds a local
    file system keeps, as pylance reports it; float seconds lose the last digit)."""
    if isinstance(storage, LocalStorage):
        with contextlib.suppress(OSError):
            return os.stat(os.path.join(storage.root, entry.path)).st_mtime_ns // 1000
    return int((entry.modified or 0.0) * 1_000_000)


def all_files(storage: Storage) -> pa.RecordBatchReader:
    """Every file under the dataset's root (branches' directories included; other base paths
    not), with its size and modification time (the epoch when the store does not say).

    Raises:
        OSError: the store cannot be listed.
    """
    entries = storage.list_tree("")
    epoch_us = [_modified_us(storage, e) for e in entries]
    root = storage.uri.rstrip("/")
    table = pa.table(
        [
            _dictionary([root] * len(entries), pa.int32()),
            pa.array([e.path for e in entries], pa.string()),
            pa.array([e.size for e in entries], pa.int64()),
            pa.array(epoch_us, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        ],
        schema=ALL_FILES_SCHEMA,
    )
    return pa.RecordBatchReader.from_batches(ALL_FILES_SCHEMA, table.to_batches())


def _base_uri(root: str, bases: dict[int, BasePath], base_id: int | None) -> str:
    if base_id is None or base_id not in bases:
        return root
    return bases[base_id].path.rstrip("/")


def _files_of(storage: Storage, manifest: Manifest, manifest_path: str) -> list[tuple[str, str, str]]:
    """(base URI, path, type) of every file one version references."""
    root = storage.uri.rstrip("/")
    bases = base_paths(manifest)
    out = [(root, manifest_path, MANIFEST)]
    if manifest.transaction_file:
        out.append((root, paths.transaction_path(manifest.transaction_file), TRANSACTION))
    for fragment in manifest.fragments:
        for f in fragment.files:
            directory = data_dir(bases, f.base_id)
            out.append((_base_uri(root, bases, f.base_id), f"{directory}/{f.path}".lstrip("/"), DATA))
        d = fragment.deletion_file
        if d is not None:
            out.append((_base_uri(root, bases, d.base_id), d.path(fragment.id), DELETION))
    for idx in decode_section(manifest.index_section):
        base_id = idx.base_id if idx.HasField("base_id") else None
        index_dir = f"{paths.INDICES_DIR}/{uuid.UUID(bytes=idx.uuid.uuid)}"
        if base_id is None:
            out += [(root, e.path, INDEX) for e in storage.list_tree(index_dir)]
        else:
            out.append((_base_uri(root, bases, base_id), index_dir, INDEX))
    return out


def tracked_files(
    storage: Storage,
    *,
    min_version: int | None = None,
    progress: Callable[[int, int | None], object] | None = None,
) -> pa.RecordBatchReader:
    """Every file referenced by a version at or above ``min_version`` (all by default), one row
    per (version, file): the manifest, the transaction file, data, deletion and index files;
    ``progress(processed, total)`` is called after each manifest.

    Raises:
        CorruptFileError: a manifest is damaged.
        TypeError: ``min_version`` is not an integer.
    """
    if min_version is not None and (isinstance(min_version, bool) or not isinstance(min_version, int)):
        raise TypeError(f"min_version must be an integer, not {min_version!r}")
    entries = [e for e in versions.list_versions(storage) if min_version is None or e.version >= min_version]

    def one(entry: versions.VersionEntry) -> list[tuple[str, str, str]] | None:
        try:
            manifest = versions.read_manifest_file(storage, entry).manifest
        except FileNotFoundError:  # cleaned up since the listing
            return None
        return _files_of(storage, manifest, entry.path)

    rows: list[tuple[int, str, str, str]] = []
    for done, (entry, files) in enumerate(zip(entries, map_on(METADATA, one, entries)), start=1):
        rows += [(entry.version, *f) for f in files or ()]
        if progress is not None:
            progress(done, len(entries))
    return _tracked_reader(rows)


def _tracked_reader(rows: list[tuple[int, str, str, str]]) -> pa.RecordBatchReader:
    version, base, path, kind = (list(c) for c in zip(*rows)) if rows else ([], [], [], [])
    table = pa.table(
        [
            pa.array(version, pa.int64()),
            _dictionary(base, pa.int32()),
            pa.array(path, pa.string()),
            _dictionary(kind, pa.int8()),
        ],
        schema=TRACKED_FILES_SCHEMA,
    )
    return pa.RecordBatchReader.from_batches(TRACKED_FILES_SCHEMA, table.to_batches())


__all__ = ["ALL_FILES_SCHEMA", "TRACKED_FILES_SCHEMA", "all_files", "tracked_files"]
