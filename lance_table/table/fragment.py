"""Reading the rows of one fragment: its data files, mapped to the dataset schema, minus deletions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_table._lru import LRU
from lance_table._parallel import cached_per_instance
from lance_table.errors import CorruptFileError
from lance_table.extensions import user_table
from lance_table.file.fields import BLOB_KEY
from lance_table.file.legacy import LegacyFileReader
from lance_table.file.legacy.prune import may_match
from lance_table.file.rows import selectable
from lance_table.file.runs import Runs
from lance_table.format import paths
from lance_table.format.bases import BasePath
from lance_table.format.manifest import DataFile, Fragment
from lance_table.schema import FieldNode
from lance_table.storage import Storage
from lance_table.table.base_storage import base_storage, data_dir
from lance_table.table.conform import conform
from lance_table.table.deletion import missing_file_error, read_deletions, search_offsets
from lance_table.table.file_ids import stored_roots
from lance_table.table.readers import READERS, FileReader, LegacyView, is_legacy_file, legacy_view
from lance_table.table.split_struct import assemble, is_split

#: the live runs of fragments' spans, by deletion vector (see :meth:`FragmentReader.live_runs`)
_LIVE: LRU[tuple[int, int, int], tuple[np.ndarray, Runs]] = LRU(64, max_bytes=64 << 20)

if TYPE_CHECKING:
    from lance_table.filters.bounds import Condition


#: every field of a dataset schema, at any depth, by id: by the roots dict the fragment readers of
#: a version share (kept with it, so an id reused by another dict never matches)
_FIELDS_BY_ID: LRU[int, tuple[dict[str, FieldNode], dict[int, FieldNode]]] = LRU(64)


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
    #: the manifest's other base paths, by id (files whose ``base_id`` names one are read there)
    bases: Mapping[int, BasePath] = field(default_factory=dict)
    _views: dict[int, LegacyView] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_per_instance
    def deleted(self) -> np.ndarray:
        """Sorted deleted offsets (checked against the manifest's count and ``physical_rows``)."""
        self.physical_rows  # noqa: B018 - the row count must be verified before it bounds anything
        return read_deletions(self.storage, self.fragment, version=self.version, bases=self.bases)

    @cached_per_instance
    def row_ids(self) -> np.ndarray | None:
        """The stable row ids of the fragment's physical rows (None: its row ids are addresses).

        Raises:
            CorruptFileError: the row id sequence is damaged or does not fit the fragment.
        """
        from lance_table.table.row_ids import fragment_row_ids

        where = f"{self.storage.uri.rstrip('/')} version {self.version} (manifest)"
        return fragment_row_ids(self.fragment, where)

    @cached_per_instance
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

    def location(self, data_file: DataFile) -> tuple[Storage, str]:
        """The storage and directory holding a data file (another base's, when it names one)."""
        if data_file.base_id is None:
            return self.storage, paths.DATA_DIR
        what = f"data file {data_file.path}"
        storage = base_storage(self.storage, self.bases, data_file.base_id, what)
        return storage, data_dir(self.bases, data_file.base_id)

    def _reader(self, data_file: DataFile) -> FileReader:
        storage, directory = self.location(data_file)
        if not is_legacy_file(data_file):
            return READERS.get(storage, data_file, self.version, directory=directory)
        view = self._views.get(id(data_file))
        if view is None:
            view = legacy_view(list(self.roots.values()), self.dictionaries, data_file, self._manifest_where)
            self._views[id(data_file)] = view
        return READERS.get(storage, data_file, self.version, view, directory=directory)

    @cached_per_instance
    def _dataset_by_id(self) -> dict[int, FieldNode]:
        roots = self.roots  # (one dict shared by the fragment readers of a version: made once)
        hit = _FIELDS_BY_ID.get(id(roots))
        if hit is not None and hit[0] is roots:
            return hit[1]
        made = {n.id: n for root in roots.values() for n in root.walk()}
        _FIELDS_BY_ID.put(id(roots), (roots, made))
        return made

    def stored_roots(self, data_file: DataFile) -> dict[int, FieldNode]:
        """The data file's top-level fields, by the dataset field id the manifest's
        ``fields`` / ``column_indices`` give their columns (as pylance reads them; see
        :mod:`file_ids`).

        Raises:
            CorruptFileError: the manifest's column indices do not fit the file (naming the
                manifest).
        """
        reader = self._reader(data_file)
        return stored_roots(reader, data_file, self._dataset_by_id, self._manifest_where)

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
        a, b = search_offsets(self.deleted, [lo, hi]).tolist()
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
        """The offsets in ``[lo, hi)`` that are not deleted, as runs (kept with the deletion
        vector, which every open of the version shares: each scan of a fragment reads the same
        runs, and the mask its reads make of them, see :meth:`Runs.derived`)."""
        deleted = self.deleted
        if not deleted.size or not _any_in(deleted, lo, hi):
            return Runs.span(lo, hi - lo)
        key = (id(deleted), lo, hi)
        kept = _LIVE.get(key)
        if kept is not None and kept[0] is deleted:  # (the entry holds the vector: its id is its own)
            return kept[1]
        runs = _live_runs(deleted, lo, hi)
        _LIVE.put(key, (deleted, runs), weight=runs.starts.nbytes * 2 + (hi - lo) // 8)
        return runs

    def read(self, names: list[str], runs: Runs, floors: Mapping[str, int] | None = None) -> pa.Table:
        """Columns ``names`` (dataset names) of the rows at ``runs``; integer values below their
        column's ``floors`` entry may read as 0 (see :meth:`LanceFileReader.read_runs`).

        Each data file's reader picks how to read the runs: the live rows of a fragment with rows
        deleted here and there are read as their span, each page's kept rows selected as it is
        decoded; a few long runs (a range deleted) are read as they are."""
        if runs.count and runs.end > self.physical_rows:
            raise IndexError(f"rows up to {runs.end} requested from a fragment of {self.physical_rows} rows")
        return self._read(names, runs, floors)

    def rows_in_interval(self, name: str, runs: Runs, ranges: Sequence[tuple[int, int]]) -> np.ndarray | None:
        """The rows among ``runs`` (sorted, not empty) whose value of the integer column ``name``
        lies in one of ``ranges`` (sorted, disjoint, closed intervals; a null never does), sorted,
        where its data file can tell without decoding the column (see
        :meth:`LanceFileReader.rows_in_interval`); None otherwise.

        Raises:
            CorruptFileError: a page of the column is damaged.
        """
        node = self.roots[name]
        if is_split(node, self.fragment.files) or node.reader_field is not node.arrow_field:
            return None
        idx = self._file_of(node)
        if idx < 0 or is_legacy_file(self.fragment.files[idx]):
            return None
        data_file = self.fragment.files[idx]
        reader = self._reader(data_file)
        if isinstance(reader, LegacyFileReader):
            return None
        file_node = self.stored_roots(data_file).get(node.id)
        if file_node is None or file_node.arrow_type != node.arrow_type:
            return None
        try:
            return reader.rows_in_interval(file_node.name, runs, ranges)
        except FileNotFoundError:  # deleted since the reader was opened (files open per read)
            storage, directory = self.location(data_file)
            where = f"{storage.uri.rstrip('/')}/{directory + '/' if directory else ''}{data_file.path}"
            raise missing_file_error(self.storage, where, self.version) from None

    def _read(self, names: list[str], runs: Runs, floors: Mapping[str, int] | None) -> pa.Table:
        by_file: dict[int, list[str]] = {}
        columns: dict[str, pa.ChunkedArray] = {}
        for name in names:
            node = self.roots[name]
            if is_split(node, self.fragment.files):
                columns[name] = self._read_split(node, runs)
                continue
            idx = self._file_of(node)
            by_file.setdefault(idx, []).append(name)
        for idx, group in by_file.items():
            if idx < 0:
                for name in group:
                    columns[name] = pa.chunked_array([pa.nulls(runs.total, self.roots[name].arrow_type)])
                continue
            data_file = self.fragment.files[idx]
            reader = self._reader(data_file)

            def where(data_file: DataFile = data_file) -> str:  # for messages: built when needed
                storage, directory = self.location(data_file)
                return f"{storage.uri.rstrip('/')}/{directory + '/' if directory else ''}{data_file.path}"

            file_roots = self.stored_roots(data_file)
            wanted = []
            file_nodes = []
            file_floors = {}
            read_names = []
            for name in group:
                node = self.roots[name]
                file_node = file_roots.get(node.id)
                if file_node is None and _without_column(data_file, node):
                    columns[name] = pa.chunked_array([pa.nulls(runs.total, node.arrow_type)])
                    continue
                if file_node is None:
                    raise CorruptFileError(
                        self._manifest_where(),
                        f"data file {data_file.path} is listed with field {node.id}, which it does not store",
                    )
                _check_blob_fields(node, file_node, where)
                file_name = file_node.name
                read_names.append(name)
                wanted.append(file_name)
                file_nodes.append(file_node)
                if floors and name in floors:
                    file_floors[file_name] = floors[name]
            if not wanted:
                continue
            try:
                table = reader.read_runs(runs, wanted, floors=file_floors)
            except FileNotFoundError:  # deleted since the reader was opened (files open per read)
                raise missing_file_error(self.storage, where(), self.version) from None
            for name, col, file_node in zip(read_names, table.columns, file_nodes):
                node = self.roots[name]
                col = conform(col, node, file_node)
                target = node.arrow_type
                try:
                    if col.type != target:
                        col = col.cast(target)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                    problem = f"column {name!r} is stored as {col.type}, which does not read as {target}"
                    raise CorruptFileError(where(), f"{problem}: {exc}") from None
                if not node.field.nullable and col.null_count:
                    raise CorruptFileError(
                        where(),
                        f"column {name!r} holds {col.null_count} null(s) in the rows read, but "
                        "the schema marks it non-nullable",
                    )
                columns[name] = col
        nodes = [self.roots[n] for n in names]
        schema = pa.schema([n.to_arrow_field() for n in nodes])
        table = pa.Table.from_arrays([columns[n] for n in names], schema=schema)
        if any(n.reader_field is not n.arrow_field for n in nodes):  # extension types as readers see them
            table = user_table(table, schema, pa.schema([n.reader_field for n in nodes]))
        return selectable(table)

    def _read_split(self, node: FieldNode, runs: Runs) -> pa.ChunkedArray:
        """A struct whose children live in several data files (see :mod:`split_struct`)."""

        def read_top(idx: int, root_id: int) -> tuple[FieldNode, pa.ChunkedArray]:
            data_file = self.fragment.files[idx]
            reader = self._reader(data_file)
            file_node = self.stored_roots(data_file).get(root_id)
            if file_node is None:
                raise CorruptFileError(
                    self._manifest_where(),
                    f"data file {data_file.path} is listed with field {root_id}, which it does not store",
                )
            table = reader.read_runs(runs, [file_node.name])
            return file_node, table.column(0)

        col = assemble(node.id, node, self.fragment.files, read_top, runs.total)
        return col if col.type == node.arrow_type else col.cast(node.arrow_type)

    def _file_of(self, node: FieldNode) -> int:
        """Index of the data file holding a field (the last one, if several do), or -1.

        2.0 files list every field id; 2.1+ files list only leaves, so a struct or list is found
        through the ids of its descendants.
        """
        ids = node.ids
        for i in range(len(self.fragment.files) - 1, -1, -1):
            if not ids.isdisjoint(self.fragment.files[i].fields):
                return i
        return -1


def _without_column(data_file: DataFile, node: FieldNode) -> bool:
    """Whether a 2.0+ data file lists the field but gives it no column (no column indices at all,
    or -1 for each of its ids it lists): the field reads as nulls there, as in pylance."""
    if not data_file.file_major_version or data_file.version == "0.1":
        return False
    if not data_file.column_indices:
        return True
    return all(col < 0 for fid, col in zip(data_file.fields, data_file.column_indices) if fid in node.ids)


def _is_blob_descriptor(node: FieldNode) -> bool:
    return pa.types.is_struct(node.arrow_type) and BLOB_KEY in node.field.metadata


def _check_blob_fields(node: FieldNode, file_node: FieldNode, where: Callable[[], str]) -> None:
    """A data file must store a blob v2 field (at any depth) as a descriptor struct, and nothing
    else as one: a manifest whose blob field is damaged (its extension name, say) would otherwise
    read the descriptors as another struct, all nulls."""
    leaves = not node.children and not file_node.children
    if leaves and not pa.types.is_struct(node.arrow_type) and not pa.types.is_struct(file_node.arrow_type):
        return  # two leaves that are not structs: neither is a descriptor
    stored = {n.id: n for n in file_node.walk()}
    for n in node.walk():
        f = stored.get(n.id)
        if f is not None and _is_blob_descriptor(n) != _is_blob_descriptor(f):
            what = "a blob descriptor" if _is_blob_descriptor(f) else "no blob descriptor"
            raise CorruptFileError(
                where(),
                f"field {n.name!r} (id {n.id}) is {'a blob' if _is_blob_descriptor(n) else 'not a blob'} "
                f"column in the manifest, but the data file stores {what} for it",
            )


def _live_runs(deleted: np.ndarray, lo: int, hi: int) -> Runs:
    """The offsets in ``[lo, hi)`` that are not among the sorted ``deleted`` ones, as runs."""
    # the gaps between the deleted rows (sorted, distinct): each runs from after one deleted
    # row to the next; gaps between neighbours are empty, and no two gaps touch
    a, b = search_offsets(deleted, [lo, hi]).tolist()
    gone = deleted[a:b].astype(np.int64)
    starts = np.empty(gone.size + 1, np.int64)
    starts[0] = lo
    np.add(gone, 1, out=starts[1:])
    ends = np.empty(gone.size + 1, np.int64)
    ends[:-1] = gone
    ends[-1] = hi
    lengths = ends - starts
    keep = lengths > 0
    return Runs(starts[keep], lengths[keep])


def _any_in(sorted_values: np.ndarray, lo: int, hi: int) -> bool:
    i = int(search_offsets(sorted_values, lo, "left"))
    return i < sorted_values.size and int(sorted_values[i]) < hi
