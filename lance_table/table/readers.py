"""The open data file readers of the process: each file's parsed footer, schema and column metadata,
kept so that a scan over thousands of small fragments does not read and parse them again."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import pyarrow as pa

from lance_table._lru import LRU
from lance_table._parallel import after_fork_in_child
from lance_table.errors import CorruptFileError, SchemaError
from lance_table.file.legacy import LegacyFileReader
from lance_table.file.reader import LanceFileReader
from lance_table.format import paths
from lance_table.format.manifest import DataFile
from lance_table.schema import FieldNode, build_tree
from lance_table.storage import Storage
from lance_table.storage.sources import DISAGREEING_SIZE, size_disagreement
from lance_table.table.deletion import missing_file_error

#: The most readers kept (whatever their size).
READER_CACHE_SIZE = 65536
#: The most memory the kept readers may take, as :func:`reader_weight` estimates it.
READER_CACHE_BYTES = 256 * 1024 * 1024
#: What a reader costs besides its metadata (its objects, schema and field tree), and how many
#: times the bytes of its metadata it takes once parsed (measured: ~15 KB for a 3-column file).
READER_BASE_BYTES = 8 * 1024
METADATA_EXPANSION = 4

FileReader: TypeAlias = "LanceFileReader | LegacyFileReader"
# (storage cache key, data file path, size the manifest records): see ReaderCache.
Key: TypeAlias = "tuple[Hashable, ...]"


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


def reader_weight(reader: FileReader) -> int:
    """An estimate of the memory a reader holds: a fixed part, its parsed metadata and the bytes
    of the file it keeps (all of a small file's)."""
    if isinstance(reader, LanceFileReader):
        stored = reader.metadata.metadata_bytes
        return READER_BASE_BYTES + METADATA_EXPANSION * max(stored, 0) + reader.held_bytes
    else:
        legacy = reader.metadata.file
        stored = legacy.size - legacy.metadata_position
    return READER_BASE_BYTES + METADATA_EXPANSION * max(stored, 0)


class ReaderCache:
    """Open file readers, shared by every dataset handle of the process; least recently used go first.

    Data files are immutable and their names unique, so a reader (the parsed footer, schema and
    column metadata) stays valid for as long as the file exists. Keys are the storage's ``cache_key``
    (the URI and a digest of the options that decide access), the file's path and the size the
    manifest records for it: a handle opened with other credentials or another endpoint never reads
    through another handle's reader, and a path rewritten with another size (a dataset deleted and
    written again at the same URI by a writer that reuses names) is opened afresh.

    The cache is bounded by entries and by the memory its readers take (:func:`reader_weight`).
    """

    def __init__(self, size: int = READER_CACHE_SIZE, max_bytes: int = READER_CACHE_BYTES) -> None:
        self._items: LRU[Key, FileReader] = LRU(size, max_bytes)

    @property
    def size(self) -> int:
        """The most readers kept."""
        return self._items.size

    @property
    def max_bytes(self) -> int:
        """The most memory the kept readers may take."""
        return self._items.max_bytes or 0

    @property
    def _lock(self) -> threading.Lock:
        return self._items.lock

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        """The estimated memory of the readers kept."""
        return self._items.nbytes

    def clear(self) -> None:
        self._items.clear()

    def get(
        self,
        storage: Storage,
        data_file: DataFile,
        version: int | None = None,
        view: LegacyView | None = None,
        directory: str = paths.DATA_DIR,
    ) -> FileReader:
        """The reader of a data file (``version``, whose manifest names it, serves error messages)
        in ``directory`` of ``storage`` (a file in another base path: that base's storage and
        directory, see :mod:`lance_table.table.base_storage`).

        A legacy file is read through ``view`` (the manifest's fields and dictionaries) when given.

        Raises:
            DataFileNotFoundError: the file does not exist (e.g. its version was cleaned up).
        """
        if not storage.cache_metadata:
            return open_reader(storage, data_file, version, view, directory)
        key: Key = (storage.cache_key, directory, data_file.path, data_file.file_size_bytes)
        if view is not None and is_legacy_file(data_file):
            key = (*key, view.key)  # a legacy file's reader depends on its view (a rename changes it)
        cached = self._items.get(key)
        if cached is not None:
            return cached
        reader = open_reader(storage, data_file, version, view, directory)
        self._items.put(key, reader, reader_weight(reader))
        return reader


def open_reader(
    storage: Storage,
    data_file: DataFile,
    version: int | None = None,
    view: LegacyView | None = None,
    directory: str = paths.DATA_DIR,
) -> FileReader:
    """A new reader of a data file (see :meth:`ReaderCache.get`)."""
    path = f"{directory}/{data_file.path}" if directory else data_file.path
    try:
        source = storage.source(path, known_size(data_file))
        if is_legacy_file(data_file):
            return _legacy_reader(source, data_file, view)
        return LanceFileReader(source)
    except FileNotFoundError:
        raise missing_file_error(storage, f"{storage.uri.rstrip('/')}/{path}", version) from None
    except CorruptFileError as exc:
        try:
            _check_size(storage, path, known_size(data_file), exc)
        except CorruptFileError as disagreement:
            exc = disagreement
        if exc.problem.startswith(DISAGREEING_SIZE) and version is not None:
            # the damage may be the manifest's: name it too
            raise CorruptFileError(exc.path, f"{exc.problem} (as version {version} records it)") from exc
        raise exc from exc.__cause__


READERS = ReaderCache()


def _readers_after_fork() -> None:
    """A forked child opens its files afresh: a cached reader of a remote file holds its parent's
    connection (and event loop), and another thread may have held the lock at the fork."""
    READERS.clear()  # (the cache's lock is replaced by the cache itself)


after_fork_in_child(_readers_after_fork)


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
    if ids:
        # a struct whose own id the file lists as a tombstone (pylance's nested casts move the
        # struct to the new file) still holds the children the file stores: keep it as their parent
        parent = {f.id: f.parent_id for f in every}
        listed = {i for i in ids if i in parent}
        for i in list(listed):
            p = parent[i]
            while p != -1 and p not in listed:
                listed.add(p)
                p = parent[p]
        kept = [f for f in every if f.id in listed]
    else:
        kept = every
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
    if ids is not None and min(ids) < 0:
        # tombstoned ids (negative) have no rows; a tombstoned struct that still parents stored
        # children is in the view, and its row starts the page table as pylance reads it
        ids = tuple(sorted({i for i in ids if i >= 0} | {n.id for r in view.roots for n in r.walk()}))
    return LegacyFileReader(
        source,  # type: ignore[arg-type]
        list(view.roots),
        field_ids=ids,
        dictionaries=view.dictionaries,
    )
