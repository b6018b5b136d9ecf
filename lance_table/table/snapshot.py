"""A snapshot: one version of a dataset as an immutable value (storage + manifest + commit options).

Operations take a snapshot and return what to commit; :meth:`Snapshot.commit` sends it through the
one commit path and returns the snapshot of the version it made. The ``Dataset`` handle is a thin
facade over a snapshot.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

from lance_table.errors import (
    BranchError,
    CorruptFileError,
    UnsupportedFormatError,
    VersionGoneError,
    VersionNotFoundError,
)
from lance_table.extensions import user_schema
from lance_table.file.v2_1.blob_v2 import has_blob_v2, is_blob_v2, read_node
from lance_table.format import paths
from lance_table.format.bases import BasePath, base_paths
from lance_table.format.manifest import LEGACY_DATA_FORMAT, Fragment, Manifest
from lance_table.schema import FieldNode, arrow_schema_from_fields, build_tree
from lance_table.storage import Storage, open_storage
from lance_table.table import branch_refs, versions
from lance_table.table.branch_refs import branch_path, check_branch_name, locate, tree_uri
from lance_table.table.commit import CommitOptions, Pending, commit
from lance_table.table.fragment import FragmentReader
from lance_table.table.fragment_readers import FragmentReaders, LazyFragments
from lance_table.table.tags import Tags, parse_tag

# Opening the latest version lists again when the one listed was cleaned up before it was read.
LATEST_TRIES = 20
# Data file formats a dataset may use to be read.
READABLE_FORMATS = ("0.1", "2.0", "2.1", "2.2")
# Data file formats whose datasets may hold blob v2 columns.
BLOB_V2_FORMATS = ("2.2",)


@dataclass(frozen=True)
class Snapshot:
    """One version of a dataset: where it lives, its manifest, and how commits on top of it are made.

    Attributes:
        storage: the dataset's storage.
        manifest: the version's manifest.
        scheme: the manifest naming scheme of the dataset (None: learn it from the listing).
        commit_options: retries, commit lock, unsafe commits.
    """

    storage: Storage
    manifest: Manifest
    scheme: str | None = None
    commit_options: CommitOptions = field(default_factory=CommitOptions)

    def __post_init__(self) -> None:
        versions.check_readable(self.manifest, self.storage.uri)
        manifest = paths.manifest_path(self.version, self.scheme or paths.ManifestNaming.V2)
        where = f"{self.storage.uri.rstrip('/')}/{manifest}"
        _check_data_format(self.manifest, where)

    @property
    def uri(self) -> str:
        return self.storage.uri

    @property
    def version(self) -> int:
        return self.manifest.version

    @cached_property
    def num_rows(self) -> int:
        """The rows of this version (its fragments' rows less their deleted rows), summed once: a
        long-lived handle counts a table of thousands of fragments again at no cost."""
        return self.manifest.num_rows

    @cached_property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version (extension types as readers see them)."""
        return user_schema(arrow_schema_from_fields(self.manifest.fields, self.manifest.schema_metadata))

    @cached_property
    def roots(self) -> dict[str, FieldNode]:
        """The top-level fields as scans read them (blob v2 columns as their descriptors)."""
        return {n.name: read_node(n) for n in build_tree(self.manifest.fields)}

    @cached_property
    def read_schema(self) -> pa.Schema:
        """The Arrow schema of what scans return: :attr:`schema`, but blob v2 columns are their
        descriptor structs (as pylance returns them)."""
        if not has_blob_v2(self.manifest.fields):
            return self.schema
        fields = [n.to_arrow_field() for n in self.roots.values()]
        return user_schema(pa.schema(fields, metadata=self.schema.metadata))

    def fragment_readers(self, ids: Sequence[int] | None = None) -> list[FragmentReader]:
        """A reader per fragment of this version, or of the fragments ``ids`` in that order.

        Raises:
            ValueError: an id names no fragment of this version.
        """
        return list(self.readers_on_demand(ids))

    def readers_on_demand(self, ids: Sequence[int] | None = None, *, lazy: bool = False) -> FragmentReaders:
        """:meth:`fragment_readers`, each reader made when first asked for (see
        :class:`~lance_table.table.fragment_readers.FragmentReaders`). With ``lazy`` (for reads
        that touch a few fragments, as a take), a manifest's fragments that are not converted yet
        are converted one by one as their readers are made.

        Raises:
            ValueError: an id names no fragment of this version.
        """
        source = self.manifest.fragment_source
        frags: Sequence[Fragment]
        if lazy and ids is None and source is not None and source.unconverted:
            frags = LazyFragments(source)  # a take converts only the fragments it touches
        else:
            frags = self.manifest.fragments
        if ids is not None:
            by_id = {f.id: f for f in frags}
            missing = [i for i in ids if i not in by_id]
            if missing:
                raise ValueError(f"fragments {missing[:5]} are not in version {self.version} of {self.uri}")
            frags = [by_id[i] for i in ids]
        dicts = self.manifest.dictionaries
        bases, roots, storage, version = self.bases, self.roots, self.storage, self.version
        return FragmentReaders(frags, lambda f: FragmentReader(f, storage, roots, version, dicts, bases))

    @cached_property
    def bases(self) -> dict[int, BasePath]:
        """The manifest's other base paths by id (pylance's multi-base datasets, shallow clones)."""
        return base_paths(self.manifest)

    def commit(self, pending: Pending, *, message: str | None = None) -> Snapshot:
        """Commit ``pending`` (planned against this version) and return the version it made.

        Raises:
            CommitConflictError, CommitStateUnknownError, CommitError: see :func:`commit`.
            UnsupportedFormatError: this version needs writer features lance_table lacks.
        """
        versions.check_writable(self.manifest, self.uri)
        return self._committed(pending, message, on_latest=False)

    def commit_on_latest(self, pending: Pending, *, message: str | None = None) -> Snapshot:
        """Commit ``pending``, planned from this version, on whatever version is latest (an
        operation that applies to any, as a Restore): the commit finds the latest itself, in its
        one listing, and records it as the read version. Returns the version it made.

        Raises:
            CommitConflictError, CommitStateUnknownError, CommitError: see :func:`commit`.
            UnsupportedFormatError: the latest version needs writer features lance_table lacks.
        """
        return self._committed(pending, message, on_latest=True)

    def _committed(self, pending: Pending, message: str | None, *, on_latest: bool) -> Snapshot:
        manifest = commit(
            self.storage,
            self.manifest,
            pending,
            options=self.commit_options,
            message=message,
            scheme=self.scheme,
            on_latest=on_latest,
        )
        return Snapshot(self.storage, manifest, self.scheme, self.commit_options)

    def checkout(self, version: int | str | None = None, asof: dt.datetime | None = None) -> Snapshot:
        """Another version (a number or tag; None for the latest) of the same dataset."""
        return load(self.storage, version, asof, self.commit_options)


def load(
    storage: Storage,
    version: int | str | None = None,
    asof: dt.datetime | None = None,
    options: CommitOptions | None = None,
) -> Snapshot:
    """The snapshot of a version number, a tag, the version current at ``asof``, or the latest.

    Raises:
        DatasetNotFoundError: there is no dataset.
        VersionNotFoundError: the version, tag target or time does not resolve.
        TagError: the tag does not exist.
        UnsupportedFormatError: the version needs features lance_table does not have.
    """
    if asof is not None and version is not None:
        raise ValueError("pass version or asof, not both")
    tags_at = storage
    if isinstance(version, str):  # a tag may name a version of a branch
        storage = _storage_of_tag(storage, version)
    for _ in range(LATEST_TRIES):
        if isinstance(version, str):
            entry = _tagged_entry(tags_at, version, storage)
        elif asof is not None:
            entry = _entry_asof(storage, asof)
        elif version is None:
            entry = versions.latest_entry(storage)
        else:
            entry = versions.find_entry(storage, int(version))
        try:
            manifest = versions.read_manifest_file(storage, entry).manifest
        except VersionGoneError:
            if version is not None or asof is not None:
                raise
            continue  # the latest was superseded and cleaned up meanwhile: list again
        return Snapshot(storage, manifest, entry.scheme, options or CommitOptions())
    raise VersionGoneError(
        f"the latest version of {storage.uri} kept being cleaned up while it was opened "
        f"({LATEST_TRIES} tries)"
    )


def _storage_of_tag(storage: Storage, tag: str) -> Storage:
    """The storage of the branch whose version tag ``tag`` names; ``storage`` is the dataset's
    root or one of its branches (tags live at the root, shared by all branches). The root for a
    tag of main, or when there is no such tag (the caller reports it).

    Raises:
        CorruptFileError: the tag file is damaged or names a branch that cannot exist.
        VersionNotFoundError: the tag names a version of a branch that does not exist.
    """
    root, _ = locate(storage)
    if root is not storage:
        root.base_store_params = storage.base_store_params
        storage = root
    path = paths.tag_path(tag)
    try:
        data = storage.read(path)
    except (FileNotFoundError, ValueError):
        return storage
    where = f"{storage.uri.rstrip('/')}/{path}"
    parsed = parse_tag(tag, data, where)
    branch = parsed.branch
    if branch is None:
        return storage
    try:
        check_branch_name(branch)
    except BranchError as exc:
        raise CorruptFileError(where, f"tag names a version of a branch that cannot exist ({exc})") from None
    if not storage.exists(branch_path(branch)):
        raise VersionNotFoundError(
            f"tag {tag!r} ({where}) names version {parsed.version} of branch {branch!r}, which does not exist"
        )
    out = open_storage(tree_uri(storage.uri, branch), storage.storage_options)
    out.base_store_params = storage.base_store_params
    return out


def _tagged_entry(tags_at: Storage, tag: str, storage: Storage) -> versions.VersionEntry:
    """The version tag ``tag`` (of the dataset at ``tags_at``) names, in ``storage`` (the
    branch the tag names a version of)."""
    version = Tags(tags_at).get_version(tag)
    try:
        return versions.find_entry(storage, version)
    except VersionNotFoundError as exc:
        root, _ = branch_refs.locate(tags_at)  # tags live at the root
        where = f"{root.uri.rstrip('/')}/{paths.tag_path(tag)}"
        raise VersionNotFoundError(
            f"tag {tag!r} ({where}) names a version that does not exist: {exc}"
        ) from None


def _entry_asof(storage: Storage, asof: dt.datetime) -> versions.VersionEntry:
    """The newest version committed at or before ``asof`` (a naive datetime is local time, as in
    pylance), by the times ``versions()`` shows: a version's own time always finds it."""
    if asof.tzinfo is not None:
        asof = asof.astimezone().replace(tzinfo=None)  # local time, as versions() shows it
    chosen = [v["version"] for v in versions.history(storage) if v["timestamp"] <= asof]
    if not chosen:
        raise VersionNotFoundError(f"{storage.uri} has no version at or before {asof.isoformat()}")
    return versions.find_entry(storage, max(chosen))


def _check_data_format(manifest: Manifest, where: str) -> None:
    """Refuse versions whose data files are in a format lance_table does not read (``where``: the
    manifest, for messages)."""
    fmt = manifest.data_storage_version
    seen = manifest.data_formats
    if fmt is None and seen:
        fmt = sorted(seen)[0]
    if fmt not in (None, *READABLE_FORMATS):
        raise UnsupportedFormatError(
            f"{where} stores data files in Lance format {fmt}; "
            f"lance_table reads formats {', '.join(READABLE_FORMATS)}"
        )
    for f in manifest.fields:
        if is_blob_v2(f) and fmt is not None and fmt not in BLOB_V2_FORMATS:
            raise UnsupportedFormatError(
                f"{where}: field {f.name!r} is a blob v2 column, which pylance stores only in format "
                f"{', '.join(BLOB_V2_FORMATS)} datasets, not in format {fmt}"
            )
    if fmt == LEGACY_DATA_FORMAT and seen <= set(READABLE_FORMATS):
        return  # pylance 0.16 could record 0.1 for other files: each file is read as its own format
    if seen - {fmt}:
        raise UnsupportedFormatError(
            f"{where} mixes data files of formats {sorted(seen)}, which lance_table does not read"
        )
