"""``take_blobs``: blob values as lazy, seekable file objects.

Blob v2 columns (format 2.2) store one descriptor per row (:mod:`lance_table.file.v2_1.blob_v2`);
the bytes are in the data file (inline), in a sidecar ``data/<data file stem>/<id>.blob`` (packed
or dedicated), or at an external URI. Descriptors are untrusted: kinds, ranges and paths are checked
against the files they name before a :class:`BlobFile` is handed out, external URIs must lie below
a registered base path (:mod:`lance_table.table.blob_locations`), and every read stays inside the
blob's range. Blob v1 columns (formats 2.0/2.1) are read whole by the file reader; their values
are served from memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.blob_descriptors import check_managed_uri
from lance_table.blob_values import DEFAULT_BLOB_BUFFER_SIZE
from lance_table.errors import (
    BlobLocationError,
    CorruptFileError,
    DataFileNotFoundError,
    SchemaError,
    UnsupportedFormatError,
    UnsupportedOperationError,
)
from lance_table.file.fields import BLOB_KEY
from lance_table.file.runs import Runs
from lance_table.file.v2_1.blob_v2 import BlobKind, blob_file_name, is_blob_v2
from lance_table.format.bases import base_paths
from lance_table.format.manifest import DataFile
from lance_table.storage import Storage, open_storage
from lance_table.table.base_storage import base_options
from lance_table.table.blob_file import BlobFile, check_buffer_size, memory_blob
from lance_table.table.blob_locations import resolve_external
from lance_table.table.deletion import missing_file_error, search_offsets
from lance_table.table.fragment import FragmentReader
from lance_table.table.snapshot import Snapshot

DATA_FILE_SUFFIX = ".lance"


@dataclass
class _Where:
    """A row of a fragment."""

    frag: FragmentReader
    offset: int


def take_blobs(
    snapshot: Snapshot,
    column: str,
    *,
    ids: Sequence[int] | np.ndarray | pa.Array | None = None,
    addresses: Sequence[int] | np.ndarray | pa.Array | None = None,
    indices: Sequence[int] | np.ndarray | pa.Array | None = None,
    allow_external: bool = False,
    buffer_size: int = DEFAULT_BLOB_BUFFER_SIZE,
) -> list[BlobFile | None]:
    """The blobs of ``column`` at the rows selected by exactly one of ``ids``, ``addresses`` or
    ``indices``, in the order given; None for a null blob. See :func:`addressed_blobs` for the
    errors.

    Raises:
        ValueError: see :func:`addressed_blobs`.
    """
    found = addressed_blobs(
        snapshot,
        column,
        ids=ids,
        addresses=addresses,
        indices=indices,
        allow_external=allow_external,
        buffer_size=buffer_size,
    )
    return [blob for _, blob in found]


def addressed_blobs(
    snapshot: Snapshot,
    column: str,
    *,
    ids: Sequence[int] | np.ndarray | pa.Array | None = None,
    addresses: Sequence[int] | np.ndarray | pa.Array | None = None,
    indices: Sequence[int] | np.ndarray | pa.Array | None = None,
    allow_external: bool = False,
    buffer_size: int = DEFAULT_BLOB_BUFFER_SIZE,
) -> list[tuple[int, BlobFile | None]]:
    """The row address and blob of ``column`` (None for a null blob) at each row selected by
    exactly one of ``ids``, ``addresses`` or ``indices``, in the order given.

    Raises:
        ValueError: not exactly one selection is given.
        SchemaError: ``column`` is not a top-level blob column.
        IndexError: an index or address names no row.
        UnsupportedOperationError: an id or address names a deleted row (a NotImplementedError,
            as pylance raises).
        UnsupportedFormatError: row ids of a dataset with stable row ids; an external blob
            without ``allow_external``.
        BlobLocationError: an external blob (with ``allow_external``) whose URI is not below one
            of the manifest's registered base paths, has a scheme that is not an object store, or
            escapes its base with ``..``; such URIs are never opened.
        CorruptFileError: a descriptor names an unknown kind, a range outside its file, or a blob
            id whose sidecar does not exist (the error names the data file, column, row and id).
        DataFileNotFoundError: the data file, or a sidecar of a version cleaned up meanwhile, is gone.
    """
    given = (("ids", ids), ("addresses", addresses), ("indices", indices))
    chosen = [(k, v) for k, v in given if v is not None]
    if len(chosen) != 1:
        raise ValueError("pass exactly one of ids, addresses or indices")
    check_buffer_size(buffer_size)
    kind, values = chosen[0]
    node = snapshot.roots.get(column)
    field = next((f for f in snapshot.manifest.fields if f.name == column and f.parent_id == -1), None)
    if node is None or field is None:
        raise SchemaError(f"column {column!r} is not in the dataset; columns are {list(snapshot.roots)}")
    v2 = is_blob_v2(field)
    if not v2 and field.metadata.get(BLOB_KEY) is None:
        raise SchemaError(f"column {column!r} is not a blob column")
    selected = np.asarray(values.to_numpy() if isinstance(values, pa.Array) else values, np.int64).reshape(-1)
    frags = snapshot.fragment_readers()
    if kind == "indices":
        rows = _by_index(frags, selected)
    else:
        if kind == "ids" and any(f.row_id_meta for f in snapshot.manifest.fragments):
            raise UnsupportedFormatError(f"{snapshot.uri} has stable row ids, which lance_table does not map")
        rows = _by_address(frags, selected)
    values_of = _read_values(rows, column)
    out: list[tuple[int, BlobFile | None]] = []
    opener = _Opener(snapshot, column, allow_external)
    for where in rows:
        value = values_of[id(where.frag)][where.offset]
        address = (where.frag.fragment.id << 32) | where.offset
        blob: BlobFile | None = None
        if value is None:
            pass
        elif v2:
            blob = opener.open(where.frag, where.offset, value)
        else:
            blob = memory_blob(value, f"{column}[{where.offset}]")
        if blob is not None:
            blob.buffer_size = buffer_size
        out.append((address, blob))
    return out


def _by_index(frags: list[FragmentReader], indices: np.ndarray) -> list[_Where]:
    counts = np.array([f.fragment.num_rows for f in frags], np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    total = int(starts[-1])
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= total):
        raise IndexError(f"row index out of range for {total} rows")
    which = np.searchsorted(starts, indices, side="right") - 1
    out = []
    for k, i in zip(which.tolist(), indices.tolist()):
        frag = frags[k]
        local = i - int(starts[k])
        physical = int(frag.live_positions()[local]) if frag.deleted.size else local
        out.append(_Where(frag, physical))
    return out


def _by_address(frags: list[FragmentReader], addresses: np.ndarray) -> list[_Where]:
    by_id = {f.fragment.id: f for f in frags}
    out = []
    for address in addresses.astype(np.uint64).tolist():
        frag = by_id.get(address >> 32)
        offset = address & 0xFFFFFFFF
        if frag is None or offset >= frag.physical_rows:
            raise IndexError(f"row address {address} names no row (fragment {address >> 32}, row {offset})")
        deleted = frag.deleted
        if deleted.size and deleted[min(int(search_offsets(deleted, offset)), deleted.size - 1)] == offset:
            # pylance's error (a NotImplementedError): a deleted row's bytes are never handed out
            raise UnsupportedOperationError(
                "A take operation that includes row addresses must not target deleted rows: "
                f"row address {address} (fragment {address >> 32}, row {offset}) is deleted"
            )
        out.append(_Where(frag, offset))
    return out


def _read_values(rows: list[_Where], column: str) -> dict[int, dict[int, Any]]:
    """Each fragment's column values at the selected offsets (descriptors as dicts, or bytes)."""
    wanted: dict[int, tuple[FragmentReader, set[int]]] = {}
    for where in rows:
        wanted.setdefault(id(where.frag), (where.frag, set()))[1].add(where.offset)
    out: dict[int, dict[int, Any]] = {}
    for key, (frag, offsets) in wanted.items():
        ordered = np.array(sorted(offsets), np.int64)
        table = frag.read([column], Runs.from_sorted_unique(ordered))
        out[key] = dict(zip(ordered.tolist(), _as_python(table.column(column).combine_chunks())))
    return out


def _as_python(values: pa.Array) -> list[Any]:
    """The values as Python objects; a descriptor's URI stays bytes (a damaged one need not be
    UTF-8: :meth:`_Opener.open` decodes it and says which descriptor is damaged)."""
    if not isinstance(values, pa.StructArray) or values.type.get_field_index("blob_uri") < 0:
        return values.to_pylist()
    names = [f.name for f in values.type]
    children = [values.field(n) for n in names]
    children[names.index("blob_uri")] = children[names.index("blob_uri")].cast(pa.large_binary())
    mask = values.is_null() if values.null_count else None
    return pa.StructArray.from_arrays(children, names=names, mask=mask).to_pylist()


class _Opener:
    """Checks descriptors and opens their blobs; file sizes are looked up once per call."""

    def __init__(self, snapshot: Snapshot, column: str, allow_external: bool) -> None:
        self.snapshot = snapshot
        self.storage = snapshot.storage
        self.column = column
        self.allow_external = allow_external
        self._sizes: dict[tuple[str, str], int] = {}

    def open(self, frag: FragmentReader, row: int, desc: dict[str, Any]) -> BlobFile:
        """The blob of descriptor ``desc``, stored at physical ``row`` of ``frag``.

        Raises:
            CorruptFileError: (naming the data file) the descriptor has an unknown kind, a range
                outside its file, or a blob id without a sidecar or registered base.
            UnsupportedFormatError: an external blob without ``allow_external``.
            BlobLocationError: an external blob outside the registered base paths.
            DataFileNotFoundError: the data file or a sidecar is gone with its version.
        """
        data_file = self._data_file(frag)
        storage, directory = frag.location(data_file)  # (another base's, when the file names one)
        data_path = f"{directory}/{data_file.path}" if directory else data_file.path
        where = f"{storage.uri.rstrip('/')}/{data_path}"
        kind, position, size = desc["kind"], int(desc["position"]), int(desc["size"])
        blob_id = int(desc["blob_id"])
        what = f"the blob descriptor of column {self.column!r} at row {row} of fragment {frag.fragment.id}"
        if kind == BlobKind.INLINE:
            return self._ranged(storage, data_path, position, size, where, what)
        if kind in (BlobKind.PACKED, BlobKind.DEDICATED):
            # (next to the data file, in its base: the descriptor does not name the base)
            path = f"{_sidecar_dir(data_file.path, where)}/{blob_file_name(blob_id)}"
            path = f"{directory}/{path}" if directory else path
            what = f"{what} (blob id {blob_id})"
            length = self._sidecar_size(storage, path, data_path, where, what)
            if kind == BlobKind.DEDICATED and (position, size) != (0, length):
                problem = (
                    f"{what} is a dedicated blob at [{position}, {position + size}), not its whole sidecar"
                )
                raise CorruptFileError(where, f"{problem} of {length} bytes")
            return self._ranged(storage, path, position, size, where, what)
        if kind == BlobKind.EXTERNAL:
            try:
                uri = bytes(desc["blob_uri"]).decode()
            except UnicodeDecodeError:
                raise CorruptFileError(where, f"{what} has a URI that is not UTF-8") from None
            return self._external(uri, blob_id, position, size, where, what)
        if kind in (BlobKind.MANAGED, BlobKind.MANAGED_BASE):
            return self._managed(
                desc["blob_uri"], blob_id if kind == BlobKind.MANAGED_BASE else 0, position, size, where, what
            )
        raise CorruptFileError(where, f"{what} has unknown kind {kind}")

    def _managed(self, raw: bytes, blob_id: int, position: int, size: int, where: str, what: str) -> BlobFile:
        """A managed blob: ``size`` bytes at ``position`` of a path relative to the dataset's root
        (``blob_id`` 0) or to the registered base path ``blob_id``."""
        try:
            uri = check_managed_uri(bytes(raw).decode())
        except (UnicodeDecodeError, ValueError):
            raise CorruptFileError(
                where, f"{what} is a managed blob whose path {raw!r} is not canonical"
            ) from None
        if not blob_id:
            self._managed_size(self.storage, uri, where, what)
            return self._ranged(self.storage, uri, position, size, where, what)
        bases = base_paths(self.snapshot.manifest)
        if blob_id not in bases:
            raise CorruptFileError(
                where, f"{what} names base path {blob_id}, which the manifest does not register"
            )
        location = resolve_external(uri, blob_id, bases)
        storage = open_storage(location.parent, base_options(self.storage, blob_id, bases[blob_id].path))
        self._managed_size(storage, location.name, where, what)
        return self._ranged(storage, location.name, position, size, where, what)

    def _managed_size(self, storage: Storage, path: str, where: str, what: str) -> int:
        """The size of a managed blob's file. A missing one is a damaged descriptor
        (CorruptFileError naming the data file ``where``), unless the version was cleaned up
        meanwhile (DataFileNotFoundError)."""
        try:
            return self._size(storage, path)
        except DataFileNotFoundError as exc:
            if exc.cleaned_up:
                raise
            problem = f"{what} names the managed blob {path}, which does not exist"
            raise CorruptFileError(where, problem) from None

    def _data_file(self, frag: FragmentReader) -> DataFile:
        node = self.snapshot.roots[self.column]
        ids = {n.id for n in node.walk()}
        for data_file in reversed(frag.fragment.files):
            if ids.intersection(data_file.fields):
                return data_file
        raise UnsupportedFormatError(f"fragment {frag.fragment.id} stores no data of column {self.column!r}")

    def _size(self, storage: Storage, path: str) -> int:
        key = (storage.uri, path)
        if key not in self._sizes:
            try:
                self._sizes[key] = storage.size(path)
            except FileNotFoundError:
                where = f"{storage.uri.rstrip('/')}/{path}"
                raise missing_file_error(self.storage, where, self.snapshot.version) from None
        return self._sizes[key]

    def _sidecar_size(self, storage: Storage, path: str, data_path: str, where: str, what: str) -> int:
        """The size of a sidecar in ``storage``. A missing one is a damaged blob id
        (CorruptFileError naming the data file), unless the version was cleaned up meanwhile
        (DataFileNotFoundError)."""
        try:
            return self._size(storage, path)
        except DataFileNotFoundError as exc:
            if exc.cleaned_up:
                raise
            self._size(storage, data_path)  # the data file itself gone: that error instead
            raise CorruptFileError(where, f"{what} names the sidecar {path}, which does not exist") from None

    def _ranged(
        self, storage: Storage, path: str, position: int, size: int, where: str, what: str
    ) -> BlobFile:
        full = f"{storage.uri.rstrip('/')}/{path}"
        if size:
            length = self._size(storage, path)
            if position < 0 or position + size > length:
                raise CorruptFileError(
                    where,
                    f"{what} lies at [{position}, {position + size}) beyond the {length} bytes of {full}",
                )

        def read_at(offset: int, n: int) -> bytes:
            try:
                return bytes(storage.read_ranges(path, [(offset, n)])[0])
            except (IsADirectoryError, NotADirectoryError):
                raise CorruptFileError(where, f"{what} names {full}, which is not a file") from None

        return BlobFile(read_at, position, size, full)

    def _external(self, uri: str, blob_id: int, position: int, size: int, where: str, what: str) -> BlobFile:
        if not self.allow_external:
            raise UnsupportedFormatError(
                f"{where}: {what} is the external object {uri!r}; pass allow_external=True to read "
                "external blobs (those below the dataset's registered base paths)"
            )
        bases = base_paths(self.snapshot.manifest)
        if blob_id and blob_id not in bases:
            problem = f"{what} names base path {blob_id}, which the manifest does not register"
            raise CorruptFileError(where, f"{problem} (its URI is {uri!r})")
        try:
            location = resolve_external(uri, blob_id, bases)
        except BlobLocationError as exc:
            raise BlobLocationError(uri, f"{exc.reason} ({what})", path=where) from None
        # (a base's own storage options, as its data files get them; see base_storage)
        options = base_options(self.storage, blob_id, bases[blob_id].path) if blob_id else None
        try:
            storage = open_storage(location.parent, options)
        except ImportError as exc:
            raise UnsupportedFormatError(f"{where}: {what} is {uri!r}, which needs {exc}") from None
        try:
            length = storage.size(location.name)
        except FileNotFoundError:
            raise CorruptFileError(
                where, f"{what} names the external object {uri!r}, which does not exist"
            ) from None
        self._sizes[(storage.uri, location.name)] = length
        if (position, size) == (0, 0):
            size = length
        return self._ranged(storage, location.name, position, size, where, what)


def _sidecar_dir(data_path: str, where: str) -> str:
    """The directory of a data file's blob sidecars (relative to ``data/``): its path without
    ``.lance``. The path comes from the manifest: it must stay below ``data/``."""
    parts = data_path.split("/")
    if (
        not data_path.endswith(DATA_FILE_SUFFIX)
        or "\\" in data_path
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise CorruptFileError(where, f"data file path {data_path!r} cannot name blob sidecar files")
    return data_path[: -len(DATA_FILE_SUFFIX)]
