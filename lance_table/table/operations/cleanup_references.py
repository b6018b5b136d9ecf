"""Which files the versions a cleanup reads reference: the union over the versions it keeps, and
the files of the versions it removes (a run of consecutive versions read from the first manifest and
the later versions' transactions). See :mod:`lance_table.table.operations.cleanup`."""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Iterable
from dataclasses import dataclass

from lance_table._parallel import METADATA, map_on
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
    seen: dict[int, Fragment] = {}
    out: set[str] = set()
    for manifest in manifests:
        out |= referenced_files(manifest, seen)
    return out


@dataclass
class _Version:
    """A version cleanup has read: its manifest file's bytes and summary; the whole manifest is
    decoded only when needed."""

    entry: versions.VersionEntry
    data: bytes
    summary: ManifestSummary

    def manifest(self, storage: Storage) -> Manifest:
        return versions.decode_manifest(storage, self.entry, self.data).manifest


def _read_all(storage: Storage, entries: list[versions.VersionEntry]) -> list[_Version]:
    """Each version's manifest file, read on threads where the store is remote (on a local disk
    a read is a copy from the page cache and the decode holds the GIL: a hand-off to a thread
    per manifest would cost more than it could win); versions removed meanwhile (by another
    cleanup) are left out.

    Raises:
        CorruptFileError: a manifest is damaged, or its name and its version disagree.
    """

    def one(entry: versions.VersionEntry) -> _Version | None:
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

    read = map_on(METADATA, one, entries) if storage.read_parallelism > 0 else map(one, entries)
    return [found for found in read if found is not None]


def _references_of_doomed(storage: Storage, doomed: dict[int, _Version]) -> set[str]:
    """Every path the doomed versions reference: the files cleanup may delete however young.

    A run of consecutive versions references what its first version does plus what each later one's
    transaction added, so only the first manifest of a run is decoded whole; a version whose
    transaction does not say exactly what it added (or has none inline) is decoded whole too. Only
    the deletion of files no kept version references depends on this, so a file missed here is merely
    kept until the grace period is over.
    """
    out: set[str] = set()
    seen: dict[int, Fragment] = {}
    for version in sorted(doomed):
        found = doomed[version]
        added = _added_files(found) if version - 1 in doomed else None
        if added is None:
            out |= referenced_files(found.manifest(storage), seen)
        else:
            out |= added
            if found.summary.transaction_file:
                out.add(paths.transaction_path(found.summary.transaction_file))
    return out


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
