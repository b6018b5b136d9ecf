"""The Dataset handle (one pinned version) and the entry points ``dataset()`` and ``write_dataset()``."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from lance_table.errors import (
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    SchemaError,
    UnsupportedFormatError,
    VersionNotFoundError,
)
from lance_table.file.runs import Runs
from lance_table.format import paths
from lance_table.format.manifest import Fragment, Manifest
from lance_table.format.transaction import COMMIT_MESSAGE_KEY, Append, Delete, Overwrite, Restore
from lance_table.schema import arrow_schema_from_fields, build_tree, fields_from_arrow
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.commit import CommitLock, CommitOptions, check_can_commit, check_rebasable, commit
from lance_table.table.conflicts import Pending
from lance_table.table.fragment import FragmentReader
from lance_table.table.scanner import Predicate, count_matching, make_spec, output_schema, scan, scan_all
from lance_table.table.tags import Tags
from lance_table.table.writer import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    ProgressCallback,
    as_reader,
    write_fragments,
)

WriteMode = Literal["create", "append", "overwrite"]
# Data file formats a dataset may use to be read; only 2.0 data files are written.
READABLE_FORMATS = ("2.0", "2.1", "2.2")
WRITABLE_FORMAT = "2.0"


class Dataset:
    """One version of a Lance dataset. It never changes: writes return a new handle.

    Open with :func:`lance_table.dataset`; create with :func:`lance_table.write_dataset`.
    """

    def __init__(
        self,
        storage: Storage,
        manifest: Manifest,
        *,
        commit_options: CommitOptions | None = None,
        scheme: str | None = None,
    ) -> None:
        versions.check_readable(manifest, storage.uri)
        self._storage = storage
        self._manifest = manifest
        self._scheme = scheme
        self._commit_options = commit_options or CommitOptions()
        self._check_data_format()

    def _check_data_format(self) -> None:
        fmt = self._manifest.data_storage_version
        versions_seen = {f.version for frag in self._manifest.fragments for f in frag.files}
        if fmt is None and versions_seen:
            fmt = sorted(versions_seen)[0]
        if fmt not in (None, *READABLE_FORMATS):
            raise UnsupportedFormatError(
                f"{self.uri} stores data files in Lance format {fmt}; "
                f"lance_table reads formats {', '.join(READABLE_FORMATS)}"
            )
        other = versions_seen - {fmt}
        if other:
            raise UnsupportedFormatError(
                f"{self.uri} mixes data files of formats {sorted(versions_seen)}, "
                "which lance_table does not read"
            )

    # -- identity ---------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._storage.uri

    @property
    def version(self) -> int:
        """The version this handle is pinned to."""
        return self._manifest.version

    @property
    def latest_version(self) -> int:
        """The newest version in storage right now."""
        return versions.latest_entry(self._storage).version

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @cached_property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version."""
        return arrow_schema_from_fields(self._manifest.fields, self._manifest.schema_metadata)

    @property
    def data_storage_version(self) -> str | None:
        return self._manifest.data_storage_version

    def __repr__(self) -> str:
        return f"Dataset({self.uri!r}, version={self.version}, rows={self.count_rows()})"

    # -- versions ---------------------------------------------------------------------------------

    def versions(self) -> list[dict[str, Any]]:
        """Every version: number, timestamp (naive UTC), operation and commit message."""
        out = []
        for entry in versions.list_versions(self._storage):
            mf = versions.read_manifest_file(self._storage, entry)
            txn = versions.read_transaction(self._storage, mf)
            out.append(
                {
                    "version": entry.version,
                    "timestamp": _naive_utc(mf.manifest.timestamp_ns),
                    "operation": txn.operation.name if txn else None,
                    "commit_message": txn.commit_message if txn else None,
                    "metadata": dict(txn.properties) if txn else {},
                }
            )
        return out

    def checkout(self, version: int | str) -> Dataset:
        """Another version (or tag) of the same dataset.

        Raises:
            VersionNotFoundError: the version does not exist.
            TagError: the tag does not exist.
        """
        manifest, scheme = _load(self._storage, version, None)
        return Dataset(self._storage, manifest, commit_options=self._commit_options, scheme=scheme)

    def checkout_latest(self) -> Dataset:
        """The newest version (this handle stays pinned)."""
        manifest, scheme = _load(self._storage, None, None)
        return Dataset(self._storage, manifest, commit_options=self._commit_options, scheme=scheme)

    @property
    def tags(self) -> Tags:
        return Tags(self._storage)

    # -- reading ----------------------------------------------------------------------------------

    def _fragment_readers(self) -> list[FragmentReader]:
        roots = {n.name: n for n in build_tree(self._manifest.fields)}
        return [FragmentReader(f, self._storage, roots, self.version) for f in self._manifest.fragments]

    def get_fragments(self) -> list[Fragment]:
        """The fragments of this version."""
        return list(self._manifest.fragments)

    def count_rows(self, filter: Predicate | None = None) -> int:
        """Rows of this version (matching ``filter``, if given)."""
        if filter is None:
            return self._manifest.num_rows
        spec = make_spec(self.schema, [], filter, False, None, None, None)
        return count_matching(self._fragment_readers(), spec)

    def to_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: Predicate | None = None,
        *,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        batch_size: int | None = None,
    ) -> pa.RecordBatchReader:
        """A RecordBatchReader over the rows (streams; DuckDB, Polars and pandas can consume it)."""
        spec = make_spec(self.schema, columns, filter, with_row_id, batch_size, offset, limit)
        out = output_schema(self.schema, spec)
        return pa.RecordBatchReader.from_batches(out, scan(self._fragment_readers(), spec, out))

    scanner = to_batches

    def to_table(
        self,
        columns: Sequence[str] | None = None,
        filter: Predicate | None = None,
        *,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
    ) -> pa.Table:
        """The rows as one table.

        Raises:
            SchemaError: a column does not exist.
            FilterError: the filter does not parse.
        """
        spec = make_spec(self.schema, columns, filter, with_row_id, 1 << 30, offset, limit)
        out = output_schema(self.schema, spec)
        return scan_all(self._fragment_readers(), spec, out)

    def take(
        self, indices: Sequence[int] | np.ndarray | pa.Array, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows by position in this version (deleted rows do not count), in the order given.

        Raises:
            IndexError: an index is outside ``[0, count_rows())``.
        """
        idx = np.asarray(
            indices.to_numpy() if isinstance(indices, pa.Array) else indices, dtype=np.int64
        ).reshape(-1)
        spec = make_spec(self.schema, columns, None, False, None, None, None)
        out = output_schema(self.schema, spec)
        total = self._manifest.num_rows
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= total):
            raise IndexError(f"row index out of range for {total} rows")
        unique, inverse = np.unique(idx, return_inverse=True)
        frags = self._fragment_readers()
        live_counts = np.array([f.fragment.num_rows for f in frags], np.int64)
        starts = np.concatenate([[0], np.cumsum(live_counts)])
        which = np.searchsorted(starts, unique, side="right") - 1
        parts = []
        for k in np.unique(which).tolist():
            frag = frags[k]
            local = unique[which == k] - starts[k]
            physical = frag.live_positions()[local] if frag.deleted.size else local
            table = frag.read(spec.columns, Runs.from_sorted_unique(physical))
            parts.append(pa.Table.from_arrays(table.columns, schema=out))
        result = pa.concat_tables(parts) if parts else out.empty_table()
        return result.take(pa.array(inverse.reshape(-1)))

    # -- writing ----------------------------------------------------------------------------------

    def _commit(self, pending: Pending, message: str | None = None) -> Dataset:
        versions.check_writable(self._manifest, self.uri)
        properties = {COMMIT_MESSAGE_KEY: message} if message else {}
        manifest = commit(
            self._storage,
            self._manifest,
            pending,
            options=self._commit_options,
            properties=properties,
            scheme=self._scheme,
        )
        return self._new_handle(manifest)

    def _new_handle(self, manifest: Manifest) -> Dataset:
        """A handle on a version this handle's process just committed."""
        return Dataset(self._storage, manifest, commit_options=self._commit_options, scheme=self._scheme)

    def delete(self, predicate: Predicate, *, commit_message: str | None = None) -> Dataset:
        """Delete the rows matching ``predicate``; returns the new version.

        Only the predicate's columns are read. Each touched fragment gets a new cumulative deletion
        file; a fragment whose rows are all deleted is dropped.
        """
        from lance_table.table.delete import plan_delete

        self._require_writable_format()
        check_rebasable(self._storage, Pending(Delete((), (), ""), self.version))
        pending = plan_delete(self, predicate)
        return self._commit(pending, commit_message)

    def restore(self, *, commit_message: str | None = None) -> Dataset:
        """Make this (old) version the latest again, as a new version."""
        latest, scheme = _load(self._storage, None, None)
        versions.check_writable(latest, self.uri)
        pending = Pending(Restore(self.version), latest.version)
        properties = {COMMIT_MESSAGE_KEY: commit_message} if commit_message else {}
        manifest = commit(
            self._storage, latest, pending, options=self._commit_options, properties=properties, scheme=scheme
        )
        return self._new_handle(manifest)

    def compact_files(self, **options: Any) -> Dataset:
        """Rewrite small fragments (and fragments with many deletions) into larger ones.

        See :func:`lance_table.table.compaction.compact_files` for the options.
        """
        from lance_table.table.compaction import compact_files

        return compact_files(self, **options)

    def cleanup_old_versions(self, **options: Any) -> Any:
        """Delete old versions and the files only they reference.

        See :func:`lance_table.table.cleanup.cleanup_old_versions` for the options.
        """
        from lance_table.table.cleanup import cleanup_old_versions

        return cleanup_old_versions(self, **options)

    def _require_writable_format(self) -> None:
        versions.check_writable(self._manifest, self.uri)
        check_can_commit(self._commit_options, self._storage)

    def _require_data_file_format(self) -> None:
        """Refuse operations that write data files into a dataset of another format than 2.0."""
        _check_writable_data_format(self._manifest, self.uri)


def _naive_utc(ns: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=ns // 1000)


def _load(storage: Storage, version: int | str | None, asof: dt.datetime | None) -> tuple[Manifest, str]:
    if isinstance(version, str):
        tag = version
        version = Tags(storage).get_version(tag)
        try:
            entry = versions.find_entry(storage, version)
        except VersionNotFoundError as exc:
            where = f"{storage.uri.rstrip('/')}/{paths.tag_path(tag)}"
            raise VersionNotFoundError(
                f"tag {tag!r} ({where}) names a version that does not exist: {exc}"
            ) from None
        return versions.read_manifest_file(storage, entry).manifest, entry.scheme
    if asof is not None:
        if version is not None:
            raise ValueError("pass version or asof, not both")
        entry = _entry_asof(storage, asof)
    elif version is None:
        entry = versions.latest_entry(storage)
    else:
        entry = versions.find_entry(storage, int(version))
    return versions.read_manifest_file(storage, entry).manifest, entry.scheme


def _entry_asof(storage: Storage, asof: dt.datetime) -> versions.VersionEntry:
    """The newest version committed at or before ``asof`` (naive datetimes are UTC)."""
    if asof.tzinfo is not None:
        asof = asof.astimezone(dt.timezone.utc).replace(tzinfo=None)
    # datetimes carry microseconds: compare at that precision
    cutoff_us = (asof - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    chosen = None
    for entry in versions.list_versions(storage):
        if versions.read_manifest_file(storage, entry).manifest.timestamp_ns // 1000 <= cutoff_us:
            chosen = entry
    if chosen is None:
        raise VersionNotFoundError(f"{storage.uri} has no version at or before {asof.isoformat()}")
    return chosen


def dataset(
    uri: str | os.PathLike[str],
    *,
    version: int | str | None = None,
    asof: dt.datetime | None = None,
    storage_options: Mapping[str, Any] | None = None,
    commit_lock: CommitLock | None = None,
    unsafe_commit: bool = False,
) -> Dataset:
    """Open a dataset at its latest version, a version number, a tag, or the version current at ``asof``.

    Raises:
        DatasetNotFoundError: there is no dataset at ``uri``.
        VersionNotFoundError: the version or time does not resolve.
        TagError: the tag does not exist.
        UnsupportedFormatError: the dataset needs features lance_table does not have.
    """
    storage = open_storage(uri, storage_options)
    options = CommitOptions(commit_lock=commit_lock, unsafe_commit=unsafe_commit)
    manifest, scheme = _load(storage, version, asof)
    return Dataset(storage, manifest, commit_options=options, scheme=scheme)


def write_dataset(
    data: Any,
    uri: str | os.PathLike[str],
    *,
    mode: WriteMode = "create",
    schema: pa.Schema | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    storage_options: Mapping[str, Any] | None = None,
    commit_message: str | None = None,
    commit_lock: CommitLock | None = None,
    unsafe_commit: bool = False,
    max_retries: int | None = None,
    progress: ProgressCallback | None = None,
) -> Dataset:
    """Write data as a new dataset, or append to / overwrite an existing one, in one atomic commit.

    ``data`` may be a pyarrow Table, RecordBatch or RecordBatchReader, an iterable of RecordBatches
    or a pandas DataFrame. Rows are streamed: memory stays bounded whatever the size, and a new data
    file (fragment) is started every ``max_rows_per_file`` rows or ``max_bytes_per_file`` bytes.

    Raises:
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        SchemaError: the data does not match the dataset's schema (append) or cannot be stored.
        UnsupportedFormatError: the dataset uses a data format or features lance_table cannot write.
        CommitConflictError: a concurrent commit makes this write impossible.
    """
    if mode not in ("create", "append", "overwrite"):
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', not {mode!r}")
    storage = open_storage(uri, storage_options)
    options = CommitOptions(
        commit_lock=commit_lock,
        unsafe_commit=unsafe_commit,
        **({"max_retries": max_retries} if max_retries is not None else {}),
    )
    check_can_commit(options, storage)
    entries = versions.list_versions(storage)
    base = versions.read_manifest_file(storage, entries[-1]).manifest if entries else None
    if base is not None and mode == "create":
        raise DatasetAlreadyExistsError(
            f"a dataset already exists at {storage.uri}; use mode='append' or 'overwrite'"
        )
    if base is not None:
        versions.check_writable(base, storage.uri)
        _check_writable_data_format(base, storage.uri)
    reader = as_reader(data, schema)
    if schema is not None and reader.schema != schema:
        reader = _cast_reader(reader, schema)
    if base is not None and mode == "append":
        target_fields = list(base.fields)
        target_schema = arrow_schema_from_fields(base.fields, base.schema_metadata)
    else:
        target_schema = reader.schema
        target_fields = fields_from_arrow(target_schema)
        build_tree(target_fields)
    frags, written = write_fragments(
        storage,
        reader,
        target_schema,
        target_fields,
        max_rows_per_file=max_rows_per_file,
        max_bytes_per_file=max_bytes_per_file,
        progress=progress,
    )
    if base is not None and mode == "append":
        op: Any = Append(tuple(frags))
    else:
        md = {k.decode(): v for k, v in (target_schema.metadata or {}).items()}
        op = Overwrite(tuple(frags), tuple(target_fields), md)
    pending = Pending(op, base.version if base else 0)
    properties = {COMMIT_MESSAGE_KEY: commit_message} if commit_message else {}
    try:
        manifest = commit(
            storage,
            base,
            pending,
            options=options,
            properties=properties,
            create_only=base is None and mode == "create",
            scheme=versions.naming_scheme(entries),
        )
    except BaseException as exc:
        if not getattr(exc, "maybe_committed", False):
            for path in written:
                with contextlib.suppress(OSError):  # best effort: cleanup removes leftovers later
                    storage.delete(path)
        raise
    return Dataset(storage, manifest, commit_options=options, scheme=versions.naming_scheme(entries))


def _check_writable_data_format(base: Manifest, uri: str) -> None:
    fmt = base.data_storage_version
    if fmt not in (None, "2.0"):
        raise UnsupportedFormatError(
            f"{uri} stores data files in Lance format {fmt}; lance_table writes only format 2.0 and never "
            "mixes formats in one dataset"
        )


def _cast_reader(reader: pa.RecordBatchReader, schema: pa.Schema) -> pa.RecordBatchReader:
    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            try:
                yield batch.select(schema.names).cast(schema)
            except (pa.ArrowInvalid, KeyError, ValueError) as exc:
                raise SchemaError(f"data cannot be cast to the given schema: {exc}") from exc

    return pa.RecordBatchReader.from_batches(schema, batches())


__all__ = ["Dataset", "DatasetNotFoundError", "dataset", "write_dataset"]
