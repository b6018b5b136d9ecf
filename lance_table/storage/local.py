"""The local file system, through ``os`` directly (fast, and with a real atomic create)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Hashable, Sequence
from typing import IO

from lance_table.storage import listing_cache
from lance_table.storage.base import Entry, StagedFile, Storage
from lance_table.storage.io_stats import record
from lance_table.storage.sources import ByteSource, LocalFileSource, size_disagreement

#: the buffer of a file written through :meth:`LocalStorage.open_writer`
WRITE_BUFFER = 1 << 16
#: whether paths of this system are joined by ``/`` as the storage's own paths are
_SLASH_SEP = os.sep == "/" and os.altsep is None


class LocalStorage(Storage):
    """A dataset directory on local disk.

    Commits use ``os.link`` of a fully written temporary file: the link fails if the target exists,
    so exactly one racing writer wins and nobody sees a half-written manifest. Nothing is fsynced
    (data files never were, and pylance does not either): a killed process loses nothing it
    committed; what a power loss keeps is up to the file system.
    """

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        super().__init__(self.root)

    def _abs(self, path: str) -> str:
        if not path:
            return self.root
        if _SLASH_SEP:  # (relative paths: what os.path.join would make of them, for less)
            return f"{self.root}/{path}" if self.root != "/" else f"/{path}"
        return os.path.join(self.root, *path.split("/"))

    def read(self, path: str) -> bytes:
        with open(self._abs(path), "rb") as f:
            data = f.read()
        record(1, len(data))
        return data

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        src = LocalFileSource(self._abs(path))
        try:
            return src.read_ranges(ranges)
        finally:
            src.close()

    def size(self, path: str) -> int:
        return os.stat(self._abs(path)).st_size

    def source(self, path: str, size: int | None = None) -> ByteSource:
        """A byte source; ``size`` (a manifest's ``file_size_bytes``) is checked against the file's.

        Raises:
            CorruptFileError: the file's size is not ``size``.
        """
        src = LocalFileSource(self._abs(path))
        if size is not None and size != src.size():
            raise size_disagreement(src.name, size, src.size())
        return src

    def _makedirs(self, full: str) -> None:
        os.makedirs(os.path.dirname(full), exist_ok=True)

    def _open_fd(self, full: str, flags: int) -> int:
        """``os.open`` of a file to create, its directories made when missing (asked only then:
        a commit creates a few files in directories that almost always exist)."""
        try:
            return os.open(full, flags, 0o666)
        except FileNotFoundError:
            self._makedirs(full)
            return os.open(full, flags, 0o666)

    def _write_file(self, full: str, data: bytes, flags: int) -> None:
        """Create ``full`` (``flags`` besides write-only and create) holding ``data``; on failure
        no partial file is left behind."""
        fd = self._open_fd(full, os.O_WRONLY | os.O_CREAT | flags)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)
            raise
        os.close(fd)

    def write(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        tmp = f"{full}.tmp-{uuid.uuid4().hex}"
        self._write_file(tmp, data, os.O_TRUNC)
        try:
            os.replace(tmp, full)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def write_new(self, path: str, data: bytes) -> None:
        self._write_file(self._abs(path), data, os.O_EXCL)

    def write_hint(self, path: str, data: bytes) -> None:
        # In place (a rename costs a journal entry): only when it leaves no longer old content behind.
        try:
            fd = os.open(self._abs(path), os.O_WRONLY)
        except FileNotFoundError:
            self.write(path, data)
            return
        try:
            fits = os.fstat(fd).st_size <= len(data)
            if fits:
                os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
        if not fits:
            self.write(path, data)

    def open_writer(self, path: str) -> IO[bytes]:
        full = self._abs(path)
        # A buffer of its own size: a small file (an append of a few rows) reaches the disk in one
        # write at close, and no system calls go into asking whether the file is a terminal and
        # what its block size is.
        return open(self._open_fd(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb", buffering=WRITE_BUFFER)

    def open_staged(self, path: str) -> StagedFile:
        """Written to a temporary name beside ``path``, renamed into place when published."""
        full = self._abs(path)
        self._makedirs(full)
        tmp = os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.tmp-{uuid.uuid4().hex}")
        return _LocalStaged(self, path, open(tmp, "wb"), tmp, full)

    def put_if_absent(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        tmp = os.path.join(os.path.dirname(full), f".tmp-{uuid.uuid4().hex}")
        self._write_file(tmp, data, os.O_EXCL)
        try:
            os.link(tmp, full)  # raises FileExistsError if another writer won
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def list_dir(self, path: str, *, stat: bool = True) -> list[Entry]:
        full = self._abs(path)
        out = []
        try:
            with os.scandir(full) as it:
                for e in it:
                    if e.is_file():
                        rel = f"{path}/{e.name}" if path else e.name
                        if stat:
                            try:
                                st = e.stat()
                            except FileNotFoundError:  # deleted since the directory was read
                                continue
                            out.append(Entry(rel, st.st_size, st.st_mtime))
                        else:
                            out.append(Entry(rel, -1, None))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return out

    def list_created_files(self, path: str) -> Sequence[Entry]:
        """See :meth:`Storage.list_created_files`: a long directory unchanged since its last
        listing is neither read nor its files stat'ed again, and the same tuple is returned (see
        :mod:`lance_table.storage.listing_cache`)."""
        try:
            return listing_cache.list_files(self._abs(path), f"{path}/" if path else "")
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_names(self, path: str) -> list[str]:
        """The names in a directory; a long directory unchanged since its last listing is not
        read again (see :mod:`lance_table.storage.listing_cache`)."""
        try:
            return listing_cache.list_names(self._abs(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def change_token(self, path: str) -> Hashable | None:
        """See :meth:`Storage.change_token` (:func:`listing_cache.state_token`)."""
        return listing_cache.state_token(self._abs(path))

    def list_tree(self, path: str) -> list[Entry]:
        out: list[Entry] = []
        todo = [path]
        while todo:  # (each file stat'ed relative to its open directory: no path walked again)
            rel = todo.pop()
            try:
                it = os.scandir(self._abs(rel))
            except OSError:  # (as os.walk: a directory that cannot be opened lists nothing)
                continue
            with it as entries:  # (an entry that cannot be stat'ed fails the listing, as under os.walk)
                for e in entries:
                    name = f"{rel}/{e.name}" if rel else e.name
                    try:
                        if e.is_dir():
                            if not e.is_symlink():  # (as os.walk: links to directories not followed)
                                todo.append(name)
                            continue
                        st = e.stat()
                    except FileNotFoundError:  # deleted since the directory was read
                        continue
                    out.append(Entry(name, st.st_size, st.st_mtime))
        return out

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._abs(path))

    def delete_many(self, paths: Sequence[str]) -> None:
        unlink, full = os.unlink, self._abs
        for path in paths:
            try:  # noqa: SIM105  (a context manager per file costs more than the unlink's Python)
                unlink(full(path))
            except FileNotFoundError:
                pass

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._abs(path))


class _LocalStaged(StagedFile):
    def __init__(self, storage: Storage, path: str, stream: IO[bytes], tmp: str, full: str) -> None:
        super().__init__(storage, path, stream)
        self._tmp = tmp
        self._full = full

    def publish(self) -> None:
        self.stream.close()
        os.replace(self._tmp, self._full)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.stream.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)
