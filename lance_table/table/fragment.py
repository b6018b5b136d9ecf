"""Reading the rows of one fragment: its data files, mapped to the dataset schema, minus deletions."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError, SchemaError, UnsupportedFormatError
from lance_table.file import LanceFileReader
from lance_table.file.fields import BLOB_KEY
from lance_table.file.legacy import LegacyFileReader
from lance_table.file.legacy.prune import may_match
from lance_table.file.rows import selectable
from lance_table.file.runs import Runs
from lance_table.format import paths
from lance_table.format.manifest import DataFile, Fragment
from lance_table.schema import FieldNode, build_tree
from lance_table.storage import Storage
from lance_table.storage.sources import DISAGREEING_SIZE, size_disagreement
from lance_table.table.deletion import missing_file_error, read_deletions

if TYPE_CHECKING:
    from lance_table.filters.bounds import Condition

READER_CACHE_SIZE = 1024

FileReader: TypeAlias = "LanceFileReader | LegacyFileReader"


def is_legacy_file(data_file: DataFile) -> bool:
    """Whether a data file is in the legacy format (0.1), as its manifest entry records it (pylance's
    rule: major 0 and minor below 3; 0.3 is how early writers recorded format 2.0)."""
    return data_file.file_major_version == 0 and data_file.file_minor_version < 3


def known_size(data_file: DataFile) -> int | None:
    """The size a manifest records for a data file, where it is the file's size.

    Legacy (0.1) files written by pylance are recorded with sizes that are not theirs (smaller than
    the file), so their size is asked of the store instead.
    """
    return None if is_legacy_file(data_file) else data_file.file_size_bytes


class ReaderCache:
    """Open file readers, shared by every dataset handle of the process.

    Data files are immutable and their names unique, so a reader (the parsed footer, schema and
    column metadata) stays valid for as long as the file exists. Keys are the storage's ``cache_key``
    (the URI and a digest of the options that decide access) and the file's path: a handle opened
    with other credentials or another endpoint never reads through another handle's reader.
    """

    def __init__(self, size: int = READER_CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Hashable, ...], FileReader] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        storage: Storage,
        data_file: DataFile,
        version: int | None = None,
        view: LegacyView | None = None,
    ) -> FileReader:
        """The reader of a data file (``version``, whose manifest names it, serves error messages).

        ``view`` (the dataset's fields and dictionary values for this file) is how a legacy file is
        read; without it, a legacy file is read with its own schema copy.

        Raises:
            DataFileNotFoundError: the file does not exist (e.g. its version was cleaned up).
            UnsupportedFormatError: the file lives in another base path.
        """
        if data_file.base_id is not None:
            raise UnsupportedFormatError(f"data file {data_file.path} lives in another base path")
        legacy = is_legacy_file(data_file)
        # A legacy file's reader depends on the schema it is read with (a rename changes it).
        key: tuple[Hashable, ...] = (storage.cache_key, data_file.path)
        if legacy and view is not None:
            key = (*key, view.key)
        with self._lock:
            cached = self._items.get(key)
            if cached is not None:
                self._items.move_to_end(key)
                return cached
        path = paths.data_file_path(data_file.path)
        reader: FileReader
        try:
            source = storage.source(path, known_size(data_file))
            reader = _legacy_reader(source, data_file, view) if legacy else LanceFileReader(source)
        except FileNotFoundError:
            raise missing_file_error(storage, f"{storage.uri.rstrip('/')}/{path}", version) from None
        except CorruptFileError as exc:
            _check_size(storage, path, known_size(data_file), exc)
            raise
        with self._lock:
            self._items[key] = reader
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return reader


READERS = ReaderCache()


def _check_size(storage: Storage, path: str, claimed: int | None, exc: CorruptFileError) -> None:
    """Raise the size disagreement behind ``exc`` when a file its manifest gave a too small size to
    looked damaged (its footer was looked for before its end). Sizes too large, and every wrong
    size on local disk and in memory, are caught by the storage layer itself."""
    if claimed is None or exc.problem.startswith(DISAGREEING_SIZE):
        return
    try:
        actual = storage.size(path)
    except OSError:
        return
    if actual != claimed:
        raise size_disagreement(f"{storage.uri.rstrip('/')}/{path}", claimed, actual) from exc


@dataclass(frozen=True)
class LegacyView:
    """How a dataset reads one legacy data file, as pylance does: with the manifest's fields (names,
    ids, nullability), restricted to the ids the manifest lists for the file, and the manifest's
    dictionary values. The file's own schema copy and dictionaries are not used: a rename or a
    change of nullability only rewrites the manifest.

    When the manifest lists no field ids for the file (very old manifests), ``roots`` is the whole
    dataset schema; ``key`` tells views apart in the reader cache.
    """

    roots: tuple[FieldNode, ...]
    dictionaries: Mapping[int, pa.Array]
    key: Hashable


def legacy_view(
    roots: Sequence[FieldNode],
    dictionaries: Mapping[int, pa.Array],
    data_file: DataFile,
    where: Callable[[], str],
) -> LegacyView:
    """The view of a legacy data file from the dataset's field tree and dictionary values.

    Raises:
        CorruptFileError: the ids the manifest lists for the file do not form a schema (``where()``
            names the manifest).
    """
    every = [n.field for r in roots for n in r.walk()]
    ids = set(data_file.fields)
    kept = [f for f in every if f.id in ids] if ids else every
    try:
        tree = tuple(build_tree(kept))
    except SchemaError as exc:
        raise CorruptFileError(
            where(), f"data file {data_file.path} lists field ids that do not form a schema: {exc}"
        ) from exc
    dicts = {f.id: dictionaries[f.id] for f in kept if f.id in dictionaries}
    key = (
        tuple((f.id, f.parent_id, f.name, f.logical_type, f.nullable) for f in kept),
        tuple(sorted((fid, len(values)) for fid, values in dicts.items())),
    )
    return LegacyView(tree, dicts, key)


def _legacy_reader(source: object, data_file: DataFile, view: LegacyView | None) -> LegacyFileReader:
    """A legacy file's reader: with the view's fields and dictionaries when there is a view (a
    dataset read), else with the file's own schema copy; the page table rows are the ids the
    manifest lists for the file."""
    ids = data_file.fields or None
    if view is None:
        return LegacyFileReader(source, field_ids=ids)  # type: ignore[arg-type]
    return LegacyFileReader(
        source,  # type: ignore[arg-type]
        list(view.roots),
        field_ids=ids,
        dictionaries=view.dictionaries,
    )


@dataclass
class FragmentReader:
    """The rows of one fragment, for the dataset's schema."""

    fragment: Fragment
    storage: Storage
    roots: dict[str, FieldNode]
    #: the version whose manifest lists the fragment (for error messages), when known
    version: int | None = None
    #: the dictionary values of legacy datasets (the manifest's), by field id
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict)
    _views: dict[int, LegacyView] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def deleted(self) -> np.ndarray:
        """Sorted deleted offsets (checked against the manifest's count and ``physical_rows``)."""
        self.physical_rows  # noqa: B018 - the row count must be verified before it bounds anything
        return read_deletions(self.storage, self.fragment, version=self.version)

    @cached_property
    def physical_rows(self) -> int:
        """The fragment's rows, deleted ones included, once every data file confirms the count.

        The manifest's ``physical_rows`` sizes loops and allocations: it is checked against the
        row count in each data file's footer (one footer read per file, cached) before it is used.

        Raises:
            CorruptFileError: a data file holds another number of rows, or there is no data file.
            DataFileNotFoundError: a data file does not exist.
        """
        rows = self.fragment.physical_rows
        if not self.fragment.files and rows:
            raise CorruptFileError(self._manifest_where(), f"fragment {self.fragment.id} has no data file")
        for data_file in self.fragment.files:
            actual = self._reader(data_file).num_rows
            if actual != rows:
                raise CorruptFileError(
                    self._manifest_where(),
                    f"fragment {self.fragment.id} has {rows} physical rows, "
                    f"but its data file {data_file.path} holds {actual}",
                )
        return rows

    def _reader(self, data_file: DataFile) -> FileReader:
        if not is_legacy_file(data_file):
            return READERS.get(self.storage, data_file, self.version)
        view = self._views.get(id(data_file))
        if view is None:
            view = legacy_view(list(self.roots.values()), self.dictionaries, data_file, self._manifest_where)
            self._views[id(data_file)] = view
        return READERS.get(self.storage, data_file, self.version, view)

    def _manifest_where(self) -> str:
        """The manifest that lists this fragment, for error messages (listed only on error)."""
        uri = self.storage.uri.rstrip("/")
        if self.version is None:
            return f"{uri} (manifest)"
        from lance_table.table import versions

        try:
            entries = versions.list_versions(self.storage)
        except (OSError, CorruptFileError):
            entries = []
        for entry in entries:
            if entry.version == self.version:
                return f"{uri}/{entry.path}"
        return f"{uri} version {self.version} (its manifest no longer exists)"

    def live_positions(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Offsets in ``[lo, hi)`` that are not deleted."""
        hi = self.physical_rows if hi is None else hi
        if not self.deleted.size:
            return np.arange(lo, hi, dtype=np.int64)
        keep = np.ones(hi - lo, bool)
        a, b = np.searchsorted(self.deleted, [lo, hi])
        keep[self.deleted[a:b].astype(np.int64) - lo] = False
        return np.flatnonzero(keep) + lo

    @property
    def structural(self) -> bool:
        """Whether the fragment's data files are format 2.1 or later (pages decoded chunk by chunk),
        as the manifest records them."""
        return any((f.file_major_version, f.file_minor_version) >= (2, 1) for f in self.fragment.files)

    def prune(self, live: Runs, conditions: Sequence[Condition]) -> Runs:
        """``live`` without the rows of pages whose statistics prove a condition false for all of
        their rows (legacy files keep min, max and null count per page; other files none)."""
        if not conditions or not live.total:
            return live
        for data_file in self.fragment.files:
            if not is_legacy_file(data_file):
                continue
            reader = self._reader(data_file)
            assert isinstance(reader, LegacyFileReader)
            stats = reader.statistics()
            if stats is None:
                continue
            keep = np.ones(stats.num_batches, bool)
            for cond in conditions:
                node = self.roots.get(cond.column)
                if node is None or node.id not in stats.fields:
                    continue
                try:
                    keep &= may_match(stats, node.id, cond.op, cond.value, nullable=node.field.nullable)
                except (ValueError, TypeError, pa.ArrowException):
                    continue  # a literal the statistics cannot be compared with: no pruning
            if keep.all():
                continue
            offsets = np.asarray(reader.metadata.batch_offsets, np.int64)
            if live.count == 1:  # no deletions here: the kept pages' row spans, clipped
                lo = int(live.starts[0])
                kept = Runs.normalized(offsets[:-1][keep], np.diff(offsets)[keep])
                live = kept.clip(lo, lo + int(live.lengths[0])).shift(lo)
            else:
                positions = live.positions()
                live = Runs.from_sorted_unique(
                    positions[keep[np.searchsorted(offsets, positions, "right") - 1]]
                )
            if not live.total:
                break
        return live

    def live_runs(self, lo: int, hi: int) -> Runs:
        if not self.deleted.size or not _any_in(self.deleted, lo, hi):
            return Runs.span(lo, hi - lo)
        return Runs.from_sorted_unique(self.live_positions(lo, hi))

    def read(self, names: list[str], runs: Runs, floors: Mapping[str, int] | None = None) -> pa.Table:
        """Columns ``names`` (dataset names) of the rows at ``runs``; integer values below their
        column's ``floors`` entry may read as 0 (see :meth:`LanceFileReader.read_runs`)."""
        if runs.count and runs.end > self.physical_rows:
            raise IndexError(f"rows up to {runs.end} requested from a fragment of {self.physical_rows} rows")
        by_file: dict[int, list[str]] = {}
        for name in names:
            node = self.roots[name]
            idx = self._file_of(node)
            by_file.setdefault(idx, []).append(name)
        columns: dict[str, pa.ChunkedArray] = {}
        for idx, group in by_file.items():
            if idx < 0:
                for name in group:
                    columns[name] = pa.chunked_array([pa.nulls(runs.total, self.roots[name].arrow_type)])
                continue
            data_file = self.fragment.files[idx]
            reader = self._reader(data_file)
            where = f"{self.storage.uri.rstrip('/')}/{paths.data_file_path(data_file.path)}"
            file_roots = {n.id: n for n in reader.metadata.roots}
            file_names = {i: n.name for i, n in file_roots.items()}
            wanted = []
            file_floors = {}
            for name in group:
                file_name = file_names.get(self.roots[name].id)
                if file_name is None:
                    raise CorruptFileError(
                        self._manifest_where(),
                        f"data file {data_file.path} is listed with field {self.roots[name].id}, "
                        "which it does not store",
                    )
                _check_blob_fields(self.roots[name], file_roots[self.roots[name].id], where)
                wanted.append(file_name)
                if floors and name in floors:
                    file_floors[file_name] = floors[name]
            try:
                table = reader.read_runs(runs, wanted, floors=file_floors)
            except FileNotFoundError:  # deleted since the reader was opened (files open per read)
                raise missing_file_error(self.storage, where, self.version) from None
            for name, file_name in zip(group, wanted):
                col = table.column(file_name)
                target = self.roots[name].arrow_type
                try:
                    columns[name] = col if col.type == target else col.cast(target)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                    problem = f"column {name!r} is stored as {col.type}, which does not read as {target}"
                    raise CorruptFileError(where, f"{problem}: {exc}") from None
                if not self.roots[name].field.nullable and columns[name].null_count:
                    raise CorruptFileError(
                        where,
                        f"column {name!r} holds {columns[name].null_count} null(s) in the rows read, but "
                        "the schema marks it non-nullable",
                    )
        schema = pa.schema([self.roots[n].to_arrow_field() for n in names])
        return selectable(pa.Table.from_arrays([columns[n] for n in names], schema=schema))

    def _file_of(self, node: FieldNode) -> int:
        """Index of the data file holding a field (the last one, if several do), or -1.

        2.0 files list every field id; 2.1+ files list only leaves, so a struct or list is found
        through the ids of its descendants.
        """
        ids = {n.id for n in node.walk()}
        for i in range(len(self.fragment.files) - 1, -1, -1):
            if ids.intersection(self.fragment.files[i].fields):
                return i
        return -1


def _is_blob_descriptor(node: FieldNode) -> bool:
    return pa.types.is_struct(node.arrow_type) and BLOB_KEY in node.field.metadata


def _check_blob_fields(node: FieldNode, file_node: FieldNode, where: str) -> None:
    """A data file must store a blob v2 field (at any depth) as a descriptor struct, and nothing
    else as one: a manifest whose blob field is damaged (its extension name, say) would otherwise
    read the descriptors as another struct, all nulls."""
    stored = {n.id: n for n in file_node.walk()}
    for n in node.walk():
        f = stored.get(n.id)
        if f is not None and _is_blob_descriptor(n) != _is_blob_descriptor(f):
            what = "a blob descriptor" if _is_blob_descriptor(f) else "no blob descriptor"
            raise CorruptFileError(
                where,
                f"field {n.name!r} (id {n.id}) is {'a blob' if _is_blob_descriptor(n) else 'not a blob'} "
                f"column in the manifest, but the data file stores {what} for it",
            )


def _any_in(sorted_values: np.ndarray, lo: int, hi: int) -> bool:
    i = int(np.searchsorted(sorted_values, lo, side="left"))
    return i < sorted_values.size and int(sorted_values[i]) < hi
