"""pylance's maintenance calls on a dataset: ``ds.stats``, ``ds.validate()`` and
``LanceDataset.drop(uri)``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from lance_table._parallel import METADATA, map_on
from lance_table.errors import (
    DataFileNotFoundError,
    DatasetNotFoundError,
    SchemaError,
    UnsupportedFormatError,
    UnsupportedOperationError,
)
from lance_table.file.container import read_metadata
from lance_table.format import paths
from lance_table.format.manifest import DataFile
from lance_table.storage import LocalStorage, open_storage
from lance_table.table import versions
from lance_table.table.base_storage import base_storage, data_dir
from lance_table.table.snapshot import Snapshot

#: pylance's ``dataset_stats`` default: fragments with fewer rows than this are "small files".
DEFAULT_MAX_ROWS_PER_GROUP = 1024


@dataclass(frozen=True)
class FieldStatistics:
    """pylance's ``FieldStatistics``: a field's id and the bytes its pages take on disk.

    Example:
        ```python
        stats = ds.stats.data_stats()
        print([(f.id, f.bytes_on_disk) for f in stats.fields])
        ```
    """

    id: int
    bytes_on_disk: int


@dataclass(frozen=True)
class DataStatistics:
    """pylance's ``DataStatistics``: one :class:`FieldStatistics` per field of the schema.

    Example:
        ```python
        print(ds.stats.data_stats().fields[0])
        ```
    """

    fields: list[FieldStatistics]


def _bytes_per_field(snapshot: Snapshot, data_file: DataFile) -> dict[int, int]:
    """The page (and column) buffer bytes of each field a data file stores."""
    meta = read_metadata(snapshot.storage.source(paths.data_file_path(data_file.path)))
    out: dict[int, int] = {}
    for field_id, column in zip(data_file.fields, data_file.column_indices):
        if 0 <= column < len(meta.columns):
            col = meta.columns[column]
            size = sum(sum(page.buffer_sizes) for page in col.pages) + sum(col.buffer_sizes)
            out[field_id] = out.get(field_id, 0) + size
    return out


class LanceStats:
    """``ds.stats``: pylance's ``LanceStats`` (dataset statistics of one version).

    Example:
        ```python
        print(ds.stats.dataset_stats()["num_fragments"], ds.stats.data_stats())
        ```
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def dataset_stats(self, max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP) -> dict[str, int]:
        """``{"num_deleted_rows", "num_fragments", "num_small_files"}`` as pylance counts them: the
        rows deletion files remove, the fragments, and the fragments with fewer rows (deleted ones
        included) than
        ``max_rows_per_group``."""
        frags = self._snapshot.manifest.fragments
        return {
            "num_deleted_rows": sum(f.num_deleted for f in frags),
            "num_fragments": len(frags),
            "num_small_files": sum(f.physical_rows < max_rows_per_group for f in frags),
        }

    def data_stats(self) -> DataStatistics:
        """Bytes on disk of each field's pages, summed over the version's data files (the data
        files' metadata is read), as pylance's ``data_stats()``; a struct's own entry is 0.

        Raises:
            UnsupportedFormatError: a data file is in legacy format 0.1 (no per-column pages).
            DataFileNotFoundError: a data file is missing.
        """
        files = [f for frag in self._snapshot.manifest.fragments for f in frag.files if f.base_id is None]
        if any(f.file_major_version == 0 for f in files):
            raise UnsupportedFormatError("stats.data_stats() does not read legacy (0.1) data files")
        totals: dict[int, int] = {}
        for sizes in map_on(METADATA, lambda f: _bytes_per_field(self._snapshot, f), files):
            for field_id, size in sizes.items():
                totals[field_id] = totals.get(field_id, 0) + size
        ids = [f.id for f in self._snapshot.manifest.fields]
        return DataStatistics([FieldStatistics(i, totals.get(i, 0)) for i in ids])

    def index_stats(self, index_name: str) -> dict[str, Any]:
        """Not supported: lance_table has no indices.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError("stats.index_stats() is not supported: lance_table has no indices")


def validate(snapshot: Snapshot, fragment_ids: Collection[int] | None = None) -> None:
    """Check a version's integrity as pylance's ``validate()``: fragment ids unique, every data and
    deletion file there (in the dataset's directory or the base path it names), deletion counts
    within the fragment; with ``fragment_ids``, of those fragments only.

    Raises:
        SchemaError: two fragments share an id, or a fragment deletes more rows than it has.
        DataFileNotFoundError: a data or deletion file is missing (in the dataset's directory, or in
            the base path a data file names).
        UnsupportedFormatError: a file names a base path the manifest does not register.
    """
    frags = snapshot.manifest.fragments
    ids = [f.id for f in frags]
    if len(set(ids)) != len(ids):
        raise SchemaError(f"{snapshot.uri} version {snapshot.version}: fragment ids repeat: {sorted(ids)}")
    if fragment_ids is not None:
        frags = tuple(f for f in frags if f.id in fragment_ids)
    for f in frags:
        if f.num_deleted > f.physical_rows:
            raise SchemaError(
                f"{snapshot.uri} version {snapshot.version}: fragment {f.id} deletes {f.num_deleted} "
                f"of its {f.physical_rows} rows"
            )
    needed = sorted({path for f in frags for path in f.files_used})
    present = map_on(METADATA, snapshot.storage.exists, needed)
    missing = [f"{snapshot.uri.rstrip('/')}/{path}" for path, there in zip(needed, present) if not there]
    # data and deletion files in other base paths, where the manifest's bases put them
    bases = snapshot.bases
    where = {
        (d.base_id, f"{data_dir(bases, d.base_id)}/{d.path}".lstrip("/")) for f in frags for d in f.files
    }
    where |= {(f.deletion_file.base_id, f.deletion_file.path(f.id)) for f in frags if f.deletion_file}
    in_bases = sorted((b, p) for b, p in where if b is not None)
    elsewhere = [(base_storage(snapshot.storage, bases, b, p), p) for b, p in in_bases]
    present = map_on(METADATA, lambda place: place[0].exists(place[1]), elsewhere)
    missing += [f"{st.uri.rstrip('/')}/{p}" for (st, p), there in zip(elsewhere, present) if not there]
    if missing:
        raise DataFileNotFoundError(missing[0], snapshot.version)


def drop(
    uri: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    ignore_not_found: bool | None = None,
) -> None:
    """Delete a dataset: every file under its directory (pylance's ``LanceDataset.drop``).

    Raises:
        DatasetNotFoundError: there is no dataset at ``uri`` (also a FileNotFoundError, an OSError
            as pylance raises), unless ``ignore_not_found``.
    """
    storage = open_storage(uri, storage_options)
    if not versions.list_versions(storage):
        if ignore_not_found:
            return
        raise DatasetNotFoundError(f"no dataset at {storage.uri} to drop")
    # The manifests first: once they are gone no reader opens a version whose files are going.
    for directory in (
        paths.VERSIONS_DIR,
        "",
    ):
        for item in storage.list_tree(directory):
            storage.delete(item.path)
    if isinstance(storage, LocalStorage):  # and the directories left empty, the root too (as pylance)
        for dirpath, _, _ in sorted(os.walk(storage.root), key=lambda d: -len(d[0])):
            with contextlib.suppress(OSError):  # (not empty: someone else's file)
                os.rmdir(dirpath)
