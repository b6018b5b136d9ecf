"""Finding, reading and writing the versions of a dataset (``_versions/*.manifest``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from lance_table._lru import LRU
from lance_table._parallel import IO, ahead_on, io_threads
from lance_table.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    UnsupportedFormatError,
    VersionGoneError,
    VersionNotFoundError,
)
from lance_table.format import flags as feature_flags
from lance_table.format import paths
from lance_table.format.manifest import Manifest
from lance_table.format.manifest_file import (
    ManifestFile,
    ManifestSummary,
    decode_manifest_file,
    decode_manifest_rest,
    decode_manifest_summary,
    manifest_body,
)
from lance_table.format.transaction import COMMIT_MESSAGE_KEY, Transaction, transaction_summary
from lance_table.storage import Storage
from lance_table.storage.base import Entry
from lance_table.table import version_names, version_summaries
from lance_table.table.version_names import VersionEntry

# Decoded manifests by (storage cache key, manifest path), reused only when the file's bytes are identical.
DECODED_CACHE_SIZE = 256
_DECODED: LRU[tuple[str, str], tuple[bytes, ManifestFile]] = LRU(DECODED_CACHE_SIZE)
_DECODED_LOCK = _DECODED.lock  # (the lock a fork must not leave held: a forked child gets another)


def list_versions(storage: Storage, *, after: int | None = None) -> list[VersionEntry]:
    """Every version of the dataset (only those above ``after``, when given), oldest first.

    Only names are listed. When every manifest has a V2 name (the inverted, zero-padded version
    numbers pylance writes by default), the versions above ``after`` are picked by comparing names,
    and only theirs are parsed: a commit's look at what is new costs little however long the
    history. On a store that lists in order, those names come first: the listing stops after them
    (a page, whatever the history's length).

    Raises:
        CorruptFileError: the directory mixes the V1 and V2 manifest naming schemes.
    """
    if after is not None:
        cut = paths.manifest_name(after, paths.ManifestNaming.V2)
        names = _v2_names_before(storage, cut, NEWER_PAGE)
        if names is not None:
            entries = _entries(names)
            _check_one_scheme(storage, entries)
            entries.sort(key=lambda e: e.version)
            return [e for e in entries if e.version > after]
    listed = _listing(storage)
    try:
        return listed.entries() if after is None else listed.after(after)
    except version_names.MixedSchemesError:
        raise _mixed(storage) from None


def _listing(storage: Storage) -> version_names.Listing:
    """The listing of ``_versions`` (worked out once for as long as it lists the same names)."""
    return version_names.listing(storage.list_names(paths.VERSIONS_DIR), storage.cache_key)


#: names asked for in the first page of an ordered listing of ``_versions`` (the newest versions
#: sort first): enough for the versions a commit has to catch up with, and little to parse
NEWER_PAGE = 16


def _v2_names_before(storage: Storage, cut: str, first_page: int) -> list[str] | None:
    """The manifest names below ``cut`` (V2 names: the versions above the one ``cut`` names,
    newest first), from an ordered listing that stops at the first name not below ``cut``; or
    (where the store does not list in order, or a V1 name shows up) None: list the directory.
    """
    ordered = _ordered_names(storage, first_page)
    if ordered is None:
        return None
    found: list[str] = []
    for name in ordered:
        if not name.endswith(paths.MANIFEST_SUFFIX):
            continue
        if len(name) != paths.V2_NAME_LENGTH:
            return None
        if name >= cut:
            break
        found.append(name)
    return found


def _ordered_names(storage: Storage, first_page: int) -> Iterator[str] | None:
    """The names in ``_versions`` in lexical order, a page at a time, the first of ``first_page``
    names; None where the store does not list in order."""
    page = storage.list_names_page(paths.VERSIONS_DIR, limit=first_page)
    if page is None:
        return None

    def names(page: tuple[list[str], str | None]) -> Iterator[str]:
        while True:
            yield from page[0]
            if page[1] is None:
                return
            following = storage.list_names_page(paths.VERSIONS_DIR, start_after=page[1])
            if following is None:
                return
            page = following

    return names(page)


def _check_one_scheme(storage: Storage, entries: list[VersionEntry]) -> None:
    if len({e.scheme for e in entries}) > 1:
        raise _mixed(storage)


def _mixed(storage: Storage) -> CorruptFileError:
    return CorruptFileError(
        f"{storage.uri.rstrip('/')}/{paths.VERSIONS_DIR}",
        "found multiple manifest naming schemes in the same directory",
    )


def _entries(names: list[str]) -> list[VersionEntry]:
    out = []
    for name in names:
        parsed = paths.parse_manifest_name(name)
        if parsed is not None:
            out.append(VersionEntry(parsed[0], f"{paths.VERSIONS_DIR}/{name}", -1, parsed[1]))
    return out


def naming_scheme(entries: list[VersionEntry]) -> str:
    """The scheme new manifests must use: the dataset's own, V2 for a new dataset."""
    return entries[0].scheme if entries else paths.ManifestNaming.V2


def latest_entry(storage: Storage) -> VersionEntry:
    """The newest version (the hint file is never trusted: the directory is listed).

    With V2 names, the newest version has the smallest name: only that one is parsed, and a store
    that lists in order is asked for its first page only.

    Raises:
        DatasetNotFoundError: there is no manifest.
        CorruptFileError: the directory mixes the V1 and V2 manifest naming schemes.
    """
    ordered = _ordered_names(storage, LATEST_PAGE)
    if ordered is not None:
        name = next((n for n in ordered if n.endswith(paths.MANIFEST_SUFFIX)), None)
        if name is None:
            raise DatasetNotFoundError(f"no Lance dataset at {storage.uri}")
        found = _entries([name]) if len(name) == paths.V2_NAME_LENGTH else []
        if found:
            return found[0]
        # a V1 name: the whole listing sorts it out
    try:
        latest = _listing(storage).latest()
    except version_names.MixedSchemesError:
        raise _mixed(storage) from None
    if latest is None:
        raise DatasetNotFoundError(f"no Lance dataset at {storage.uri}")
    return latest


#: names asked for in the first page of an ordered listing when only the newest version is wanted
LATEST_PAGE = 8


def find_entry(storage: Storage, version: int) -> VersionEntry:
    """The manifest file of one version.

    Raises:
        VersionNotFoundError: the version does not exist.
        DatasetNotFoundError: there is no dataset.
    """
    if paths.is_detached_version(version):
        return _detached_entry(storage, version)
    # Looked up by name (one stat or HEAD each), not by listing a history of thousands.
    for scheme in (paths.ManifestNaming.V2, paths.ManifestNaming.V1):
        path = f"{paths.VERSIONS_DIR}/{paths.manifest_name(version, scheme)}"
        if storage.exists(path):
            return VersionEntry(version, path, -1, scheme)
    entries = list_versions(storage)
    if not entries:
        raise DatasetNotFoundError(f"no Lance dataset at {storage.uri}")
    raise VersionNotFoundError(
        f"version {version} of {storage.uri} does not exist "
        f"(versions {entries[0].version}..{entries[-1].version})"
    )


def _detached_entry(storage: Storage, version: int) -> VersionEntry:
    """The manifest file of a detached version (V2 naming, as every detached version has).

    Raises:
        VersionNotFoundError: there is no such detached version.
    """
    path = paths.manifest_path(version)
    if not storage.exists(path):
        raise VersionNotFoundError(f"detached version {version} of {storage.uri} does not exist ({path})")
    return VersionEntry(version, path, -1, paths.ManifestNaming.V2)


def read_manifest_file(storage: Storage, entry: VersionEntry) -> ManifestFile:
    """Read and decode one manifest file.

    Raises:
        VersionGoneError: the manifest was deleted since it was listed (a ``FileNotFoundError``).
        CorruptFileError: the file is damaged or holds another version's manifest.
    """
    return decode_manifest(storage, entry, _manifest_bytes(storage, entry, "opened"))


def _manifest_bytes(storage: Storage, entry: VersionEntry, doing: str) -> bytes:
    """The bytes of ``entry``'s manifest file.

    Raises:
        VersionGoneError: the manifest was deleted since it was listed (while it was being
            ``doing``).
    """
    try:
        return storage.read(entry.path)
    except FileNotFoundError:
        raise VersionGoneError(
            f"version {entry.version} of {storage.uri} no longer exists: its manifest "
            f"({entry.path}) was removed, by cleanup_old_versions, while it was being {doing}"
        ) from None


def read_manifest_rest(storage: Storage, entry: VersionEntry) -> ManifestFile:
    """Read one manifest file and decode all of it but its fragments (``manifest.fragments`` is
    empty: see :func:`decode_manifest_rest`), or all of it where the rest needs them or it was
    decoded before. For a commit that needs only the rest of the latest version (a restore): not
    cached, and never to be read as the version's manifest.

    Raises:
        VersionGoneError: the manifest was deleted since it was listed.
        CorruptFileError: the file is damaged or holds another version's manifest.
    """
    data = _manifest_bytes(storage, entry, "read")
    hit = _DECODED.get((storage.cache_key, entry.path))
    if hit is not None and hit[0] == data:
        return hit[1]
    where = f"{storage.uri.rstrip('/')}/{entry.path}"
    found = decode_manifest_rest(data, where)
    if found is None:
        return decode_manifest(storage, entry, data)
    manifest, transaction = found
    if manifest.version != entry.version:
        raise CorruptFileError(
            where, f"file name says version {entry.version}, manifest says {manifest.version}"
        )
    return ManifestFile(manifest, transaction, len(data), where)


def decode_manifest(storage: Storage, entry: VersionEntry, data: bytes) -> ManifestFile:
    """Decode the bytes of one manifest file (``read_manifest_file`` without the read).

    Raises:
        CorruptFileError: the file is damaged or holds another version's manifest.
    """
    where = f"{storage.uri.rstrip('/')}/{entry.path}"
    key = (storage.cache_key, entry.path)
    hit = _DECODED.get(key)
    if hit is not None and hit[0] == data:  # the very same bytes: reuse what they decoded to
        return hit[1]
    mf = decode_manifest_file(data, where)
    if mf.manifest.version != entry.version:
        raise CorruptFileError(
            where, f"file name says version {entry.version}, manifest says {mf.manifest.version}"
        )
    _DECODED.put(key, (data, mf))
    return mf


def remember_manifest(
    storage: Storage, path: str, data: bytes, manifest: Manifest, transaction: bytes
) -> None:
    """Keep a manifest this process just committed (``data``: the bytes written at ``path``) as
    if its file had been decoded: the next open of the latest version, by the next append of a
    stream of them, reads the file and finds the same bytes, without decoding them again."""
    where = f"{storage.uri.rstrip('/')}/{path}"
    _DECODED.put((storage.cache_key, path), (data, ManifestFile(manifest, transaction, len(data), where)))


def check_readable(manifest: Manifest, uri: str) -> None:
    """Refuse manifests whose reader feature flags lance_table does not implement.

    Raises:
        UnsupportedFormatError: naming the flags.
    """
    _check_flags(manifest.reader_feature_flags, feature_flags.READABLE, "reader", manifest.version, uri)


def check_writable(manifest: Manifest, uri: str) -> None:
    """Refuse to write on top of a manifest whose writer feature flags lance_table does not implement.

    Raises:
        UnsupportedFormatError: naming the flags.
    """
    _check_flags(manifest.writer_feature_flags, feature_flags.WRITABLE, "writer", manifest.version, uri)


def _check_flags(flags: int, supported: int, kind: str, version: int, uri: str) -> None:
    bad = feature_flags.unsupported(flags, supported)
    if bad:
        raise UnsupportedFormatError(
            f"{uri} (version {version}) needs {kind} features lance_table lacks: "
            f"{feature_flags.describe(bad)} (flags {flags})"
        )


def read_transaction(storage: Storage, mf: ManifestFile) -> Transaction | None:
    """The transaction that produced a version: inline if present, else ``_transactions/<file>``."""
    m = mf.manifest
    where = mf.path or f"{storage.uri.rstrip('/')}/{paths.VERSIONS_DIR} version {m.version}"
    return _transaction_of(storage, mf.transaction, m.transaction_file, where)


def _transaction_of(
    storage: Storage, inline: bytes | None, transaction_file: str, where: str
) -> Transaction | None:
    found = _transaction_bytes(storage, inline, transaction_file, where)
    return Transaction.from_bytes(*found) if found is not None else None


def _transaction_bytes(
    storage: Storage, inline: bytes | None, transaction_file: str, where: str
) -> tuple[bytes, str] | None:
    """A version's serialized transaction (inline, else its file's) and where it was found."""
    if inline is not None:
        return inline, where
    if transaction_file:
        path = paths.transaction_path(transaction_file)
        try:
            return storage.read(path), f"{storage.uri.rstrip('/')}/{path}"
        except FileNotFoundError:
            return None
    return None


def history(storage: Storage) -> list[dict[str, Any]]:
    """Every version, oldest first, shaped as pylance's ``versions()``: ``version``, ``timestamp``
    (naive local time, as pylance computes it) and ``metadata`` (the version's summary, strings);
    and beside them ``operation``, ``commit_message`` and ``transaction_properties``.

    Each manifest file's summary is cached by what the listing says of the file (see
    :mod:`version_summaries`), so only manifests not seen before are read: concurrently, then
    decoded here, each compared with the previous version's fragments. Versions cleaned up since
    the listing are left out, but never the latest (the directory is listed again if it went).

    Raises:
        CorruptFileError: a manifest or transaction is damaged, or the directory mixes the V1 and
            V2 manifest naming schemes.
    """

    def read(entry: VersionEntry) -> bytes | None:
        try:
            return storage.read(entry.path)
        except FileNotFoundError:
            return None

    def one(entry: VersionEntry, data: bytes) -> dict[str, Any]:
        where = f"{storage.uri.rstrip('/')}/{entry.path}"
        summary, totals = _summary(storage.cache_key, data, where)
        if summary.version != entry.version:
            raise CorruptFileError(
                where, f"file name says version {entry.version}, manifest says {summary.version}"
            )
        found = _transaction_bytes(storage, summary.transaction, summary.transaction_file, where)
        name, properties = transaction_summary(*found) if found is not None else (None, {})
        return {
            "version": entry.version,
            "timestamp": _version_time(summary.timestamp_ns),
            "metadata": totals,
            "operation": name,
            "commit_message": properties.get(COMMIT_MESSAGE_KEY) if found is not None else None,
            "transaction_properties": properties,
        }

    for _ in range(_HISTORY_TRIES):
        files = _manifest_files(storage)
        shown = version_summaries.shown(storage.cache_key, files)
        if shown is not None:
            return shown
        now = time.time()
        keys = [version_summaries.summary_key(storage, f, now) for _, f in files]
        found = [version_summaries.cached(k) for k in keys]
        todo = [i for i, hit in enumerate(found) if hit is None]
        for i, data in zip(todo, _read_in_turn(storage, read, [files[i][0] for i in todo])):
            if data is not None:
                found[i] = one(files[i][0], data)
                version_summaries.remember(keys[i], found[i])  # type: ignore[arg-type]
        if not found or found[-1] is not None:
            out = [v for v in found if v is not None]
            if len(out) == len(found) and None not in keys:  # each file's content identified
                version_summaries.show(storage.cache_key, files, out)
            return out
        # the latest listed version was superseded and cleaned up before it was read: list again
    raise VersionGoneError(
        f"the latest version of {storage.uri} kept being cleaned up while the versions were read"
    )


def _read_in_turn(
    storage: Storage, read: Callable[[VersionEntry], bytes | None], entries: list[VersionEntry]
) -> Iterator[bytes | None]:
    """``read`` of each entry, in order. On a remote store the reads run ahead of the caller, as
    many in flight as the store is worth (they wait on it), while the caller decodes what came in
    (decoding holds the GIL: it runs on one thread anyway). On a local disk a read is a copy from
    the page cache, cheaper than a hand-off to another thread: they run inline."""
    if storage.read_parallelism > 0:
        return ahead_on(IO, read, entries, min(storage.read_parallelism, io_threads()))
    return map(read, entries)


def _summary(dataset_key: str, data: bytes, where: str) -> tuple[ManifestSummary, dict[str, str]]:
    """A manifest file's summary and fragment totals. The fragment records are found as a run
    that mostly repeats the dataset's previous version (see :mod:`version_summaries`) and are not
    parsed; only the rest of the manifest is, and that it holds no fragment proves the run whole.
    Otherwise the manifest is parsed whole and its fragments counted one by one.

    Raises:
        CorruptFileError: the manifest is damaged.
    """
    run = version_summaries.find_fragment_run(dataset_key, manifest_body(data, where))
    if run is not None:
        summary = decode_manifest_summary(data, where, skip=run.span)
        if not summary.fragments:
            version_summaries.keep(dataset_key, run)
            return summary, run.totals
    summary = decode_manifest_summary(data, where)
    return summary, summary.totals()


def _manifest_files(storage: Storage) -> list[tuple[VersionEntry, Entry]]:
    """Every manifest file with what the listing says of it (size, time, ETag), oldest first;
    worked out once for as long as the storage answers with the very same listing (a local
    ``_versions`` provably unchanged: see :meth:`Storage.list_created_files`). Callers must not
    change the list.

    Raises:
        CorruptFileError: the directory mixes the V1 and V2 manifest naming schemes.
    """
    files = storage.list_created_files(paths.VERSIONS_DIR)
    hit = _FILES.get(storage.cache_key)
    if hit is not None and hit[0] is files:
        return hit[1]
    listed = {e.name: e for e in files if e.name.endswith(paths.MANIFEST_SUFFIX)}
    entries = _entries(list(listed))
    _check_one_scheme(storage, entries)
    entries.sort(key=lambda e: e.version)
    found = [(e, listed[e.path.rsplit("/", 1)[-1]]) for e in entries]
    _FILES.put(storage.cache_key, (files, found))
    return found


#: the last manifest files worked out of a listing, by storage cache key
_FILES: LRU[str, tuple[Sequence[Entry], list[tuple[VersionEntry, Entry]]]] = LRU(16)


_HISTORY_TRIES = 20


def _version_time(ns: int) -> dt.datetime:
    """A version's time as ``versions()`` shows it (naive local time), computed as pylance computes
    it: whole seconds and the microseconds of the rest, both in floating point (so the microseconds
    agree with pylance's to the last digit)."""
    seconds = ns // 1e9
    return dt.datetime.fromtimestamp(seconds) + dt.timedelta(microseconds=(ns % 1e9) // 1e3)


def write_version_hint(storage: Storage, version: int) -> None:
    """Best-effort update of ``latest_version_hint.json`` (only a hint; readers list the directory),
    where the storage keeps one (see ``Storage.keeps_version_hint``)."""
    if not storage.keeps_version_hint:
        return
    with contextlib.suppress(OSError):
        # (what json.dumps({"version": version}, separators=(",", ":")) writes, without its cost)
        storage.write_hint(paths.LATEST_VERSION_HINT, b'{"version":%d}' % int(version))
