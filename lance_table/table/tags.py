"""Tags (``_refs/tags/<name>.json`` in pylance's format) and pins: the refs that keep versions alive.

Cleanup deletes old versions unless a tag or a pin names them, and it looks at both twice: before
it decides and again after it has deleted manifests (see :mod:`lance_table.table.operations.cleanup`). Writers
of refs follow the matching order, write the ref first and then check that the version's manifest
still exists, so that every interleaving ends with each ref naming a readable version:

- ``Tags.create`` / ``Tags.update`` write the tag, then check the version; a version cleaned up in
  between makes them undo their write and raise :class:`VersionNotFoundError`.
- :func:`pinned` holds a pin while a restore reads an old version and commits it.

Writers of one tag are serialized by a lock file (``_refs/locks/tag-<name>.lock``, created with the
storage's atomic create), so that an update racing a delete cannot bring the deleted tag back.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import json
import random
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from lance_table.errors import CorruptFileError, TagError, VersionGoneError, VersionNotFoundError
from lance_table.format import paths
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.branch_refs import MAIN_BRANCH, branch_storage, locate

# A tag lock older than this belongs to a writer that died: it may be broken.
LOCK_STALE_SECONDS = 30.0
# How long a tag writer waits for the lock before giving up.
LOCK_TIMEOUT_SECONDS = 20.0
# A pin older than this belongs to an operation that died: cleanup ignores and removes it.
PIN_STALE_SECONDS = 3600.0
# A commit in flight shows cleanup it is alive by its transaction file's age: it rewrites the file
# before a manifest attempt made this long after the last write, and cleanup takes a file younger
# than IN_FLIGHT_SECONDS that no manifest references for a commit that may still land (the margin
# absorbs clock skew between a machine and the store's modification times).
COMMIT_REFRESH_SECONDS = 300.0
IN_FLIGHT_SECONDS = 3600.0


class Tag(dict[str, Any]):
    """A tag: pylance's ``Tag`` dict (keys ``branch``, the branch whose version it names or None
    for main, ``version``, ``created_at``,
    ``updated_at``, ``manifest_size``, ``metadata``), whose fields also read as attributes, and
    its ``name``. Like pylance's, it is a plain dict: changing it (``update``, ``pop``, ...)
    changes only this copy, not the tag (use :class:`Tags` for that).

    Example:
        ```python
        ds.tags.create("first", 1)
        tag = ds.tags.list()["first"]
        print(tag["version"], tag.created_at)
        ```
    """

    def __init__(
        self,
        name: str,
        version: int,
        created_at: dt.datetime,
        updated_at: dt.datetime,
        manifest_size: int,
        metadata: dict[str, Any],
        branch: str | None = None,
    ) -> None:
        super().__init__(
            branch=branch,
            version=version,
            created_at=created_at,
            updated_at=updated_at,
            manifest_size=manifest_size,
            metadata=metadata,
        )
        self.name = name

    @property
    def branch(self) -> Any:
        """The branch whose version the tag names (None: main), as pylance's tag files record it."""
        return self.get("branch")

    @property
    def version(self) -> int:
        """The version the tag names."""
        return int(self["version"])

    @property
    def created_at(self) -> dt.datetime:
        """When the tag was created (UTC)."""
        return self["created_at"]

    @property
    def updated_at(self) -> dt.datetime:
        """When the tag was last moved (UTC)."""
        return self["updated_at"]

    @property
    def manifest_size(self) -> int:
        """The size of the tagged version's manifest, in bytes."""
        return int(self["manifest_size"])

    @property
    def metadata(self) -> dict[str, Any]:
        """The tag's metadata (see :meth:`Tags.replace_metadata`)."""
        return self["metadata"]

    @classmethod
    def fromkeys(cls, iterable: Iterable[Any], value: Any = None) -> dict[Any, Any]:
        """A plain dict of ``iterable``'s keys, each holding ``value`` (as pylance's
        ``Tag.fromkeys``: its ``Tag`` is a ``dict``)."""
        return dict.fromkeys(iterable, value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tag) and self.name != other.name:
            return False
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __reduce__(self) -> tuple[Any, ...]:
        return (_tag_of, (self.name, dict(self)))

    __hash__ = None


def _tag_of(name: str, items: dict[str, Any]) -> Tag:
    """A tag of ``name`` holding ``items`` (unpickling)."""
    tag = Tag(name, 1, _EPOCH, _EPOCH, 0, {})
    tag.clear()
    tag.update(items)
    return tag


# What names a version to tag: a number (of the handle's branch), a tag, ``(branch, version)``.
Reference = int | str | tuple[str | None, int | None] | None

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _now() -> str:
    """UTC time as pylance writes it: nanoseconds and a ``Z`` suffix."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond * 1000:09d}Z"


def _parse_time(text: str) -> dt.datetime:
    base, _, frac = text.rstrip("Z").partition(".")
    value = dt.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    if frac and not frac.isdigit():
        raise ValueError(f"bad fraction of a second in {text!r}")
    return value.replace(microsecond=int((frac + "000000")[:6])) if frac else value


def _positive_int(value: object) -> int:
    """A version number as JSON stores it: an integer >= 1 (not a bool, a float or a string)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= paths.U64_MAX:
        raise ValueError(f"version {value!r} is not a positive 64-bit integer")
    return value


def parse_tag(name: str, data: bytes, where: str) -> Tag:
    """Decode one tag file.

    Raises:
        CorruptFileError: naming ``where``, when the file is not a tag as pylance writes it.
    """
    try:
        body = json.loads(data)
        if not isinstance(body, dict):
            raise ValueError(f"a tag file holds a JSON object, not {type(body).__name__}")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValueError("metadata is not an object")
        size = body.get("manifestSize", 0)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"manifestSize {size!r} is not a size")
        branch = body.get("branch")
        if branch is not None and not isinstance(branch, str):
            raise ValueError(f"branch {branch!r} is not a name")
        created, updated = (body.get(k, "1970-01-01T00:00:00Z") for k in ("createdAt", "updatedAt"))
        if not isinstance(created, str) or not isinstance(updated, str):
            raise ValueError("createdAt and updatedAt must be strings")
        return Tag(
            name=name,
            version=_positive_int(body.get("version")),
            created_at=_parse_time(created),
            updated_at=_parse_time(updated),
            manifest_size=size,
            metadata=metadata,
            branch=None if branch == "main" else branch,
        )
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CorruptFileError(where, f"tag file is not valid ({exc})") from None


def _checked_name(name: str) -> str:
    try:
        return paths.check_tag_name(name)
    except ValueError as exc:
        raise TagError(str(exc)) from None


class Tags:
    """The tags of a dataset: ``create``, ``update``, ``delete``, ``list``, ``get_version``
    (``ds.tags``, pylance's ``Tags``).

    Example:
        ```python
        ds.tags.create("stable", ds.version)
        print(ds.tags.get_version("stable"), list(ds.tags.list()))
        ds.tags.delete("stable")
        ```
    """

    def __init__(self, storage: Storage, current: int | None = None) -> None:
        """``storage``: the dataset, or one of its branches (tags live at the root, shared by all
        branches, as pylance keeps them); ``current``: the version of the handle the tags were
        asked from (what ``create`` and ``update`` name when given no version, as pylance's
        ``reference=None``)."""
        self._storage, self._branch = locate(storage)
        self._current = current

    def _where(self, path: str) -> str:
        return f"{self._storage.uri.rstrip('/')}/{path}"

    def _entry(self, branch: str | None, version: int | None) -> tuple[Storage, versions.VersionEntry]:
        """The storage of ``branch`` and its version ``version`` (None: its latest)."""
        storage = branch_storage(self._storage, branch)
        if version is None:
            return storage, versions.latest_entry(storage)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise VersionNotFoundError(f"{version!r} is not a version number of {storage.uri}")
        return storage, versions.find_entry(storage, version)

    def _body(
        self, branch: str | None, version: int, size: int, created: str, metadata: dict[str, Any]
    ) -> bytes:
        body = {
            "branch": branch,
            "version": version,
            "createdAt": created,
            "updatedAt": _now(),
            "manifestSize": size,
            "metadata": metadata,
        }
        return json.dumps(body, indent=2).encode()

    def _read(self, name: str) -> tuple[Tag, bytes]:
        path = paths.tag_path(_checked_name(name))
        try:
            data = self._storage.read(path)
        except FileNotFoundError:
            raise TagError(f"tag {name!r} does not exist") from None
        return parse_tag(name, data, self._where(path)), data

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        """Hold the lock of one tag (created atomically; a lock older than LOCK_STALE_SECONDS is broken)."""
        path = paths.tag_lock_path(name)
        token = json.dumps({"owner": uuid.uuid4().hex, "created": time.time()}).encode()
        deadline = time.monotonic() + LOCK_TIMEOUT_SECONDS
        delay = 0.002
        while True:
            try:
                self._storage.put_if_absent(path, token)
                break
            except FileExistsError:
                if self._lock_is_stale(path):
                    self._storage.delete(path)
                    continue
                if time.monotonic() > deadline:
                    raise TagError(
                        f"tag {name!r} is locked by another writer ({self._where(path)}); try again"
                    ) from None
                time.sleep(random.uniform(0, delay))
                delay = min(delay * 2, 0.1)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                self._storage.delete(path)

    def _lock_is_stale(self, path: str) -> bool:
        try:
            created = json.loads(self._storage.read(path))["created"]
            return bool(time.time() - float(created) > LOCK_STALE_SECONDS)
        except FileNotFoundError:
            return False  # released meanwhile: just try again
        except (ValueError, KeyError, TypeError):
            return True  # not a lock we wrote (locks are created whole, never partial)

    def _undo_if_version_gone(
        self, name: str, at: Storage, entry: versions.VersionEntry, previous: bytes | None
    ) -> None:
        """After writing a tag: if cleanup removed its version (in ``at``, the storage of its
        branch) meanwhile, put back what was there."""
        if at.exists(entry.path):
            return
        path = paths.tag_path(name)
        if previous is None:
            self._storage.delete(path)
        else:
            self._storage.write(path, previous)
        raise VersionNotFoundError(
            f"version {entry.version} of {at.uri} was cleaned up while tag {name!r} was written"
        )

    def _manifest_size(self, at: Storage, entry: versions.VersionEntry) -> int:
        """The size of a version's manifest in ``at`` (pylance records it in the tag).

        Raises:
            VersionGoneError: the manifest was cleaned up since it was found.
        """
        try:
            return at.size(entry.path)
        except FileNotFoundError:
            raise VersionGoneError(
                f"version {entry.version} of {at.uri} was cleaned up while it was tagged"
            ) from None

    def create(self, tag: str, reference: Reference = None) -> None:
        """Name a version: ``reference`` is a version number of the handle's branch, another
        tag's name, ``(branch, version)`` (branch None or ``"main"``: main; version None: the
        branch's latest), or None for the handle's version (pylance's parameters). The tag is
        written at the dataset's root, recording the branch of its version.

        Raises:
            TagError: the tag exists already or the name is invalid.
            BranchError: the branch named does not exist.
            VersionNotFoundError: the version does not exist (or was cleaned up meanwhile).
        """
        name = _checked_name(tag)
        branch, version = self._resolve(reference)
        at, entry = self._entry(branch, version)
        data = self._body(branch, entry.version, self._manifest_size(at, entry), _now(), {})
        with self._locked(name):
            try:
                self._storage.put_if_absent(paths.tag_path(name), data)
            except FileExistsError:
                raise TagError(f"tag {name!r} already exists") from None
            self._undo_if_version_gone(name, at, entry, None)

    def _resolve(self, reference: Reference) -> tuple[str | None, int | None]:
        """(the branch, None for main; the version, None for its latest) ``reference`` names."""
        if reference is None:
            if self._current is None:
                raise TagError("name the version to tag")
            return self._branch, self._current
        if isinstance(reference, str):
            named = self._read(reference)[0]
            return named.branch, named.version
        if isinstance(reference, tuple) and len(reference) == 2:
            branch, version = reference
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise TypeError(f"a branch reference's version is an integer or None, not {version!r}")
            return (None if branch in (None, MAIN_BRANCH) else branch), version
        return self._branch, reference

    def update(self, tag: str, reference: Reference = None) -> None:
        """Point an existing tag at another version (``reference`` as in :meth:`create`).

        Raises:
            TagError: the tag does not exist.
            BranchError: the branch named does not exist.
            VersionNotFoundError: the version does not exist (or was cleaned up meanwhile).
        """
        name = _checked_name(tag)
        branch, version = self._resolve(reference)
        at, entry = self._entry(branch, version)
        size = self._manifest_size(at, entry)
        with self._locked(name):
            old, raw = self._read(name)
            created = json.loads(raw).get("createdAt") or _now()
            body = self._body(branch, entry.version, size, created, old.metadata)
            self._storage.write(paths.tag_path(name), body)
            self._undo_if_version_gone(name, at, entry, raw)

    def replace_metadata(self, tag: str, metadata: dict[str, str]) -> None:
        """Replace a tag's whole metadata with ``metadata`` (pylance's ``replace_metadata``): the
        version it names and its ``updated_at`` stay as they are.

        Raises:
            TypeError: ``metadata`` is not a dict of strings (as pylance raises).
            TagError: the tag does not exist or the name is invalid.
            CorruptFileError: the tag file is damaged.
        """
        if not isinstance(metadata, dict):
            raise TypeError(
                f"argument 'metadata': {type(metadata).__name__!r} object is not an instance of 'dict'"
            )
        bad = next((v for kv in metadata.items() for v in kv if not isinstance(v, str)), None)
        if bad is not None:
            raise TypeError(f"argument 'metadata': {type(bad).__name__!r} object is not an instance of 'str'")
        name = _checked_name(tag)
        with self._locked(name):
            _, raw = self._read(name)
            body = json.loads(raw)
            body["metadata"] = dict(metadata)
            self._storage.write(paths.tag_path(name), json.dumps(body, indent=2).encode())

    def delete(self, tag: str) -> None:
        """Remove a tag.

        Raises:
            TagError: the tag does not exist.
        """
        name = tag
        with self._locked(_checked_name(name)):
            self._read(name)
            self._storage.delete(paths.tag_path(name))

    def get_version(self, tag: str) -> int:
        """The version a tag names.

        Raises:
            TagError: the tag does not exist or the name is invalid.
            CorruptFileError: the tag file is damaged.
        """
        return self._read(tag)[0].version

    def list(self) -> dict[str, Tag]:
        """Every tag, by name.

        Raises:
            CorruptFileError: a tag file is damaged (the error names it).
        """
        return tags_in(self._storage)

    def list_ordered(self, order: str | None = None) -> builtins.list[tuple[str, Tag]]:
        """Every tag as ``(name, tag)``, by version, newest first (``order="asc"``: oldest first),
        as pylance's ``list_ordered``; tags of one version by name.

        Raises:
            ValueError: ``order`` is not "asc" or "desc".
            CorruptFileError: a tag file is damaged.
        """
        if order not in (None, "asc", "desc"):
            raise ValueError(f"order must be 'asc' or 'desc', not {order!r}")
        items = sorted(self.list().items(), key=lambda item: (item[1].version, item[0]))
        return items if order == "asc" else items[::-1]


def tags_in(storage: Storage) -> dict[str, Tag]:
    """Every tag file in ``storage``'s own ``_refs/tags`` directory, by name (the dataset's tags
    when ``storage`` is its root).

    Raises:
        CorruptFileError: a tag file is damaged (the error names it).
    """
    out = {}
    for entry in storage.list_dir(paths.TAGS_DIR, stat=False):
        if not entry.name.endswith(".json"):
            continue
        name = entry.name[: -len(".json")]
        try:
            data = storage.read(entry.path)
        except FileNotFoundError:
            continue  # deleted since the listing
        out[name] = parse_tag(name, data, f"{storage.uri.rstrip('/')}/{entry.path}")
    return out


@contextlib.contextmanager
def pinned(storage: Storage, version: int) -> Iterator[None]:
    """Keep ``version`` alive against a concurrent cleanup while the block runs.

    Write the pin before reading the version: a cleanup that misses the pin deleted the manifest
    before the pin existed, so the read that follows fails cleanly instead of committing a version
    whose files are about to go.
    """
    path = paths.pin_path(uuid.uuid4().hex)
    storage.write(path, json.dumps({"version": version, "created": time.time()}).encode())
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            storage.delete(path)


def pinned_versions(storage: Storage, *, now: float | None = None) -> set[int]:
    """The versions live pins name. Pins that are stale or not ours to read are left out."""
    now = time.time() if now is None else now
    out = set()
    for entry in storage.list_dir(paths.PINS_DIR, stat=False):
        try:
            body = json.loads(storage.read(entry.path))
            if now - float(body["created"]) <= PIN_STALE_SECONDS:
                out.add(_positive_int(body["version"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # deleted meanwhile, or damaged: a pin only ever delays cleanup
    return out
