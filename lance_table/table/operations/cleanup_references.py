"""Which files the versions a cleanup reads reference: the union over the versions it keeps, and
the files of the versions it removes (a run of consecutive versions read from the first manifest and
the later versions' transactions). See :mod:`lance_table.table.operations.cleanup`."""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from lance_table._parallel import METADATA, ahead_on, io_threads
from lance_table.errors import CorruptFileError, LanceTableError
from lance_table.format import paths
from lance_table.format.manifest import Fragment, Manifest
from lance_table.format.manifest_file import ManifestSummary, decode_manifest_head
from lance_table.format.transaction import checked_pb
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.indices import decode_section


def referenced_files(manifest: Manifest, seen: dict[int, Fragment] | None = None) -> set[str]:
    """Paths (relative to the dataset root) a version needs.

    ``seen`` (fragment objects by id; holding them keeps their ids theirs) skips fragments already
    counted: consecutive versions share their fragment objects (see
    :func:`~lance_table.format.fragment.checked_fragments`), so a caller taking the union over a
    history passes one dict to every call.
    """
    out: set[str] = set()
    for frag in manifest.fragments:
        if seen is not None:
            if id(frag) in seen:
                continue
            seen[id(frag)] = frag
        out |= frag.files_named
    if manifest.transaction_file:
        out.add(paths.transaction_path(manifest.transaction_file))
    out |= index_dirs(manifest)
    return out


def index_dirs(manifest: Manifest) -> set[str]:
    """The directories (``_indices/<uuid>``) of the indices a version has."""
    return {
        f"{paths.INDICES_DIR}/{uuid_mod.UUID(bytes=idx.uuid.uuid)}"
        for idx in decode_section(manifest.index_section)
        if not idx.HasField("base_id")
    }


def _union_of_references(manifests: Iterable[Manifest]) -> set[str]:
    """Every path some of ``manifests`` references."""
    union = _Union()
    for manifest in manifests:
        union.add(manifest)
    return union.paths


class _Union:
    """The union of the paths the manifests added so far reference (consecutive versions share
    their fragment objects: each is counted once)."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self._seen: dict[int, Fragment] = {}

    def add(self, manifest: Manifest) -> None:
        self.paths |= referenced_files(manifest, self._seen)


@dataclass
class _Version:
    """A version cleanup has read: its manifest file's size and summary, and its bytes while they
    are held (cleanup holds a bounded amount: see :mod:`lance_table.table.operations.cleanup`);
    the whole manifest is decoded only when needed."""

    entry: versions.VersionEntry
    data: bytes | None
    summary: ManifestSummary
    size: int = -1

    def __post_init__(self) -> None:
        if self.size < 0 and self.data is not None:
            self.size = len(self.data)

    def manifest(self, storage: Storage) -> Manifest:
        """The decoded manifest (read again when its bytes are no longer held).

        Raises:
            VersionGoneError: its bytes are not held and the file is gone.
        """
        if self.data is None:
            return versions.read_manifest_file(storage, self.entry).manifest
        return versions.decode_manifest(storage, self.entry, self.data).manifest


def _read_one(storage: Storage, entry: versions.VersionEntry) -> _Version | None:
    """One version's manifest file, or None where it was removed meanwhile (by another cleanup).

    Raises:
        CorruptFileError: the manifest is damaged, or its name and its version disagree.
    """
    try:
        data = storage.read(entry.path)
    except FileNotFoundError:
        return None
    where = f"{storage.uri.rstrip('/')}/{entry.path}"
    summary = decode_manifest_head(data, where)  # the fragments are decoded where needed
    if summary.version != entry.version:
        raise CorruptFileError(
            where, f"file name says version {entry.version}, manifest says {summary.version}"
        )
    return _Version(entry, data, summary)


def _read_each(storage: Storage, entries: list[versions.VersionEntry]) -> Iterator[_Version]:
    """Each version's manifest file, in order, one at a time (the caller decides which bytes it
    keeps: a history of thousands of manifests is gigabytes). Where the store is remote, reads
    run ahead on threads; on a local disk a read is a copy from the page cache and the decode
    holds the GIL: a hand-off to a thread per manifest would cost more than it could win.
    Versions removed meanwhile (by another cleanup) are left out.

    Raises:
        CorruptFileError: a manifest is damaged, or its name and its version disagree.
    """

    def one(entry: versions.VersionEntry) -> _Version | None:
        return _read_one(storage, entry)

    if storage.read_parallelism > 0:
        read: Iterable[_Version | None] = ahead_on(
            METADATA, one, entries, min(storage.read_parallelism, io_threads())
        )
    else:
        read = map(one, entries)
    return (found for found in read if found is not None)


def _read_all(storage: Storage, entries: list[versions.VersionEntry]) -> list[_Version]:
    """:func:`_read_each` as a list (every manifest's bytes held: for small histories and tests)."""
    return list(_read_each(storage, entries))


class _Removed:
    """Every path the doomed versions reference, added a version at a time, oldest first: the
    files cleanup may delete however young.

    A run of consecutive versions references what its first version does plus what each later one's
    transaction added, so only the first manifest of a run is decoded whole; a version whose
    transaction does not say exactly what it added (or has none inline) is decoded whole too. Only
    the deletion of files no kept version references depends on this, so a file missed here is merely
    kept until the grace period is over. (A version whose predecessor is kept after all references
    nothing beyond what that one keeps and what its own transaction added.)
    """

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.paths: set[str] = set()
        self._seen: dict[int, Fragment] = {}

    def add(self, found: _Version, after_doomed: bool) -> None:
        """Add ``found``'s paths; ``after_doomed``: the version before it is doomed too."""
        added = _added_files(found) if after_doomed else None
        if added is None:
            self.paths |= referenced_files(found.manifest(self._storage), self._seen)
        else:
            self.paths |= added
            if found.summary.transaction_file:
                self.paths.add(paths.transaction_path(found.summary.transaction_file))


def _references_of_doomed(storage: Storage, doomed: dict[int, _Version]) -> set[str]:
    """Every path the doomed versions reference (see :class:`_Removed`)."""
    removed = _Removed(storage)
    for version in sorted(doomed):
        removed.add(doomed[version], version - 1 in doomed)
    return removed.paths


def _added_files(found: _Version) -> set[str] | None:
    """The data and deletion files a version's inline transaction added to its predecessor's, or None
    when the transaction does not tell (another kind of operation, or none inline).

    Read from the transaction's protobuf (checked as a decode checks it), not turned into objects:
    a history of overwrites of a large table holds thousands of fragments per transaction."""
    if found.summary.transaction is None:
        return None
    try:
        pb = checked_pb(found.summary.transaction, found.entry.path)
    except LanceTableError:
        return None
    kind = pb.WhichOneof("operation")
    if kind == "reserve_fragments":
        return set()
    if kind == "delete":
        return set().union(*(Fragment.from_pb(f).files_named for f in pb.delete.updated_fragments))
    if kind in ("append", "overwrite"):
        new = list(getattr(pb, kind).fragments)
    elif kind == "rewrite":
        rewrite = pb.rewrite
        new = [f for group in (*rewrite.groups, rewrite) for f in group.new_fragments]
    else:
        return None
    if any(f.HasField("deletion_file") for f in new):
        return None  # its path depends on the fragment id, assigned at commit
    return {paths.data_file_path(d.path) for f in new for d in f.files}
