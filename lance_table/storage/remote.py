"""Storage on any fsspec filesystem: memory, S3 (s3fs) and the rest (the byte sources of their files
are in :mod:`.remote_sources`)."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Sequence
from typing import IO, Any

from lance_table._parallel import after_fork_in_child
from lance_table.storage.arrow_s3 import ArrowS3
from lance_table.storage.base import Entry, Storage
from lance_table.storage.failures import STORAGE_METHODS, wrap_methods
from lance_table.storage.io_stats import record
from lance_table.storage.remote_sources import _ArrowS3Source, _DirectS3Source, _FsspecSource
from lance_table.storage.s3_direct import MAX_PUT, DirectReadFailed, DirectS3
from lance_table.storage.sources import ByteSource, size_disagreement

#: reads of different files a remote store is given at once (see ``Storage.read_parallelism``);
#: S3 clients get a connection pool of at least this size (see ``options.s3fs_arguments``)
REMOTE_READ_PARALLELISM = 32


def _mtime(info: dict[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
        try:
            return float(value)
        except (TypeError, ValueError):
            continue
    return None


def _etag(info: dict[str, Any]) -> str | None:
    value = info.get("ETag") or info.get("etag")
    return str(value) if value else None


class FsspecStorage(Storage):
    """A dataset directory on an fsspec filesystem.

    Args:
        fs: the filesystem.
        root: the dataset's path inside ``fs`` (no protocol).
        uri: the URI the user gave, for messages.
        access: a digest of the options the filesystem was opened with (see ``Storage.cache_key``).
    """

    atomic_put = False
    #: whether parent directories must exist before a file is created (not on object stores)
    needs_mkdir = True
    read_parallelism = REMOTE_READ_PARALLELISM

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_methods(cls, STORAGE_METHODS)

    def __init__(self, fs: Any, root: str, uri: str, *, access: str = "") -> None:
        super().__init__(uri, access=access)
        self._fs = fs
        self._pid = os.getpid()
        self.root = root.rstrip("/")

    @property
    def fs(self) -> Any:
        """The filesystem, opened again with the same options in a process forked from the one
        that opened it (an s3fs filesystem runs on its process's event loop and connections)."""
        if self._pid != os.getpid():
            self._fs = type(self._fs)(**self._fs.storage_options)
            self._pid = os.getpid()
        return self._fs

    def _abs(self, path: str) -> str:
        return f"{self.root}/{path}" if path else self.root

    def _fresh(self, lister: Any, base: str, **kwargs: Any) -> Any:
        """A listing of the store as it is now, kept in no cache afterwards.

        fsspec backends with a listing cache (s3fs keeps one for the life of the filesystem object,
        shared by every user of it in the process) would otherwise answer later listings, ``info``
        and ``size`` from a stale listing, and report files written since by others as missing.
        """
        self.fs.invalidate_cache(base)
        try:
            return lister(base, **kwargs)
        finally:
            self.fs.invalidate_cache(base)

    def read(self, path: str) -> bytes:
        data = bytes(self.fs.cat_file(self._abs(path)))
        record(1, len(data))
        return data

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        return self.source(path).read_ranges(ranges)

    def size(self, path: str) -> int:
        return int(self.fs.size(self._abs(path)))

    def source(self, path: str, size: int | None = None) -> ByteSource:
        return _FsspecSource(self.fs, self._abs(path), size, f"{self.uri.rstrip('/')}/{path}")

    def _parent(self, full: str) -> None:
        if self.needs_mkdir:
            self.fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)

    def write(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        self._parent(full)
        self.fs.pipe_file(full, data)

    def open_writer(self, path: str) -> IO[bytes]:
        full = self._abs(path)
        self._parent(full)
        return self.fs.open(full, "wb")

    def put_if_absent(self, path: str, data: bytes) -> None:
        # Check-then-write: only safe when the caller serializes commits (a commit lock).
        if self.exists(path):
            raise FileExistsError(errno.EEXIST, "already exists", self._abs(path))
        self.write(path, data)

    def list_dir(self, path: str, *, stat: bool = True) -> list[Entry]:
        base = self._abs(path)
        try:
            infos = self._fresh(self.fs.ls, base, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for info in infos:
            if info.get("type") != "file":
                continue
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            rel = f"{path}/{name}" if path else name
            out.append(Entry(rel, int(info.get("size") or 0), _mtime(info), _etag(info)))
        return out

    def list_tree(self, path: str) -> list[Entry]:
        base = self._abs(path)
        try:
            found = self._fresh(self.fs.find, base, detail=True)
        except FileNotFoundError:
            return []
        for full in found:  # find may have cached the listings of subdirectories too
            self.fs.invalidate_cache(str(full).rsplit("/", 1)[0])
        out = []
        prefix = self.root.lstrip("/") + "/"
        for full, info in found.items():
            if info.get("type") != "file":
                continue
            rel = str(full).lstrip("/")
            rel = rel[len(prefix) :] if rel.startswith(prefix) else rel
            out.append(Entry(rel, int(info.get("size") or 0), _mtime(info)))
        return out

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self._abs(path))

    def exists(self, path: str) -> bool:
        full = self._abs(path)
        self.fs.invalidate_cache(full)
        return bool(self.fs.isfile(full))


wrap_methods(FsspecStorage, STORAGE_METHODS)  # client failures become typed errors (failures.py)


class MemoryStorage(FsspecStorage):
    """fsspec's process-wide in-memory filesystem; commits use an exclusive create under a lock."""

    atomic_put = True
    needs_mkdir = False
    read_parallelism = 0
    _lock = threading.Lock()

    def source(self, path: str, size: int | None = None) -> ByteSource:
        """A byte source; ``size`` is checked against the file's at once (it costs nothing here).

        Raises:
            CorruptFileError: the file's size is not ``size``.
        """
        src = super().source(path, None)
        if size is not None and size != src.size():
            raise size_disagreement(src.name, size, src.size())
        return src

    def put_if_absent(self, path: str, data: bytes) -> None:
        with self._lock:
            self.fs.pipe_file(self._abs(path), data, mode="create")

    @classmethod
    def _new_lock(cls) -> None:
        cls._lock = threading.Lock()  # a forked child: another thread may have held it at the fork


after_fork_in_child(MemoryStorage._new_lock)


class ConditionalPutStorage(FsspecStorage):
    """An object store whose commits are a conditional create (``pipe_file(mode="create")``).

    The backend sends the store's create-if-absent precondition (S3 and Azure: ``If-None-Match: *``;
    GCS: ``ifGenerationMatch=0``). A lost race shows up in several shapes, all normalized to
    FileExistsError: the backend's own FileExistsError (the server named the failed precondition),
    OSError(EINVAL) for a bare 412, and OSError(EBUSY) for a 409 from a concurrent conditional
    write. Because clients retry on timeouts, "already exists" may be our own earlier, successful
    attempt: the object is read back and compared byte for byte before a conflict is declared.
    """

    atomic_put = True
    needs_mkdir = False
    keeps_version_hint = False

    def put_if_absent(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        try:
            self._create(full, data)
            return
        except FileExistsError as exc:
            cause: OSError = exc
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EBUSY) and "recondition" not in str(exc):
                raise
            cause = exc
        finally:
            self.fs.invalidate_cache(full)
        try:
            existing = self.read(path)  # (S3: one GET, no HEAD)
        except FileNotFoundError:
            # a 409 while another conditional write was in flight that then failed: try again later
            raise FileExistsError(errno.EEXIST, "concurrent conditional write", full) from cause
        if existing == data:
            return  # our own write, retried by the client after a timeout
        raise FileExistsError(errno.EEXIST, "already exists", full) from cause

    def _create(self, full: str, data: bytes) -> None:
        """Write ``data`` to ``full`` unless an object is there (see the class)."""
        self.fs.pipe_file(full, data, mode="create")


#: characters that make fsspec read a path given to ``rm`` as a glob pattern
_GLOB = frozenset("*?[")


class S3Storage(ConditionalPutStorage):
    """S3 through s3fs; commits use a conditional PUT (``If-None-Match: *``). With ``direct``
    (the default where the options allow it, see :mod:`.s3_direct`), data files' byte ranges and
    whole-file reads are plain signed GETs; with ``arrow`` (the storage option
    ``lance_table_s3_reader="pyarrow"``, see :mod:`.arrow_s3`), pyarrow's S3 client reads the
    byte ranges of data files."""

    def __init__(
        self,
        fs: Any,
        root: str,
        uri: str,
        *,
        access: str = "",
        arrow: ArrowS3 | None = None,
        direct: DirectS3 | None = None,
    ) -> None:
        super().__init__(fs, root, uri, access=access)
        self._arrow = arrow
        self._direct = direct

    def source(self, path: str, size: int | None = None) -> ByteSource:
        arrow, direct = self._arrow, self._direct
        name = f"{self.uri.rstrip('/')}/{path}"
        if arrow is not None and arrow.usable():
            return _ArrowS3Source(self.fs, arrow, self._abs(path), size, name)
        if direct is not None and direct.usable:
            return _DirectS3Source(self.fs, direct, self._abs(path), size, name)
        return super().source(path, size)

    def list_names_page(
        self, path: str, *, start_after: str = "", limit: int = 1000
    ) -> tuple[list[str], str | None] | None:
        """One ``ListObjectsV2`` request (S3 lists keys in lexical order); see
        :meth:`Storage.list_names_page`. None on a version-aware filesystem (its listings are of
        object versions)."""
        fs = self.fs
        if fs.version_aware:
            return None
        bucket, key, _ = fs.split_path(self._abs(path))
        prefix = f"{key.rstrip('/')}/" if key else ""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/", "MaxKeys": limit}
        if start_after:
            kwargs["StartAfter"] = prefix + start_after
        listed: tuple[list[str], list[str], bool] | None = None
        direct = self._direct
        if direct is not None and direct.usable:
            with contextlib.suppress(DirectReadFailed):
                listed = direct.list(bucket, prefix, limit, kwargs.get("StartAfter", ""))
        if listed is None:
            out = fs.call_s3("list_objects_v2", **kwargs)
            keys = [str(c["Key"]) for c in out.get("Contents", [])]
            common = [str(c["Prefix"]) for c in out.get("CommonPrefixes", [])]
            listed = keys, common, bool(out.get("IsTruncated"))
        keys, prefixes, truncated = listed
        names = [key[len(prefix) :] for key in keys]
        if not truncated:
            return names, None
        # the next page starts after this one's last file, or after everything below its last
        # subdirectory (both count towards MaxKeys)
        ends = [p[len(prefix) :] + "\U0010ffff" for p in prefixes]
        return names, max([*names, *ends])

    def write(self, path: str, data: bytes) -> None:
        """One direct PUT where the client can send it (see :mod:`.s3_direct`), else s3fs's."""
        full = self._abs(path)
        if not self._put_directly(full, data, if_absent=False):
            super().write(path, data)

    def _create(self, full: str, data: bytes) -> None:
        if not self._put_directly(full, data, if_absent=True):
            super()._create(full, data)

    def _put_directly(self, full: str, data: bytes, *, if_absent: bool) -> bool:
        """Whether ``data`` went to ``full`` in one direct PUT (False: send it through s3fs).

        Raises:
            FileExistsError, OSError: see :meth:`DirectS3.put`.
        """
        direct = self._direct
        if direct is None or not direct.usable or not direct.writes or len(data) > MAX_PUT:
            return False
        bucket, _, key = full.partition("/")
        try:
            direct.put(bucket, key, bytes(data), if_absent=if_absent, name=full)
        except DirectReadFailed:
            return False
        finally:
            self.fs.invalidate_cache(full)  # (s3fs's listings would not know of the object)
        return True

    def delete_many(self, paths: Sequence[str]) -> None:
        """Remove files, up to 1000 in one ``DeleteObjects`` request (missing keys are not an
        error there either), instead of one request per file."""
        plain = [p for p in paths if not _GLOB.intersection(p)]
        for path in paths:
            if _GLOB.intersection(path):  # fsspec would expand the name as a pattern
                self.delete(path)
        if len(plain) < 2:
            for path in plain:
                self.delete(path)
            return
        self.fs.rm([self._abs(p) for p in plain])

    def read(self, path: str) -> bytes:
        """A whole file in one GET (s3fs would first ask for its size, to split large reads)."""
        full = self._abs(path)
        direct = self._direct
        data: bytes | None = None
        if direct is not None and direct.usable:
            bucket, _, key = full.partition("/")
            with contextlib.suppress(DirectReadFailed):
                data = direct.get(bucket, key, name=f"{self.uri.rstrip('/')}/{path}")
        if data is None:
            data = bytes(self.fs.cat_file(full, max_concurrency=1))
        record(1, len(data))
        return data


class AzureStorage(ConditionalPutStorage):
    """Azure Blob Storage through adlfs; commits upload with ``If-None-Match: *``."""


class GCSStorage(ConditionalPutStorage):
    """Google Cloud Storage through gcsfs; commits upload with ``ifGenerationMatch=0``."""
