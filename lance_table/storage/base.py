"""The storage interface: the only way lance_table touches files.

Paths are relative to the dataset root and use ``/``. Implementations exist for the local disk,
fsspec's in-memory filesystem, S3 (through s3fs) and any other fsspec filesystem (read-only unless
the caller provides a commit lock or opts into unsafe commits).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from lance_table.storage.sources import ByteSource


@dataclass(frozen=True)
class Entry:
    """A file found by listing: its path relative to the dataset root, size and modification time."""

    path: str
    size: int
    modified: float | None  # seconds since the epoch, when the backend knows it
    etag: str | None = None  # the store's digest of the content, when the listing gives it

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class StagedFile:
    """A file being written that appears at its path only when :meth:`publish` is called;
    :meth:`discard` leaves nothing there (an object store's multipart upload is aborted)."""

    def __init__(self, storage: Storage, path: str, stream: IO[bytes]) -> None:
        self.storage = storage
        self.path = path
        self.stream = stream

    def publish(self) -> None:
        """Finish the file: it appears whole at its path."""
        self.stream.close()

    def discard(self) -> None:
        """Drop what was written; nothing is left at the path."""
        discard = getattr(self.stream, "discard", None)
        try:
            if callable(discard):  # fsspec buffered files: abort the upload, write nothing
                discard()
                with contextlib.suppress(AttributeError):
                    self.stream.closed = True  # type: ignore[misc]  # (else its __del__ closes it)
            else:
                self.stream.close()
        finally:
            with contextlib.suppress(OSError):
                self.storage.delete(self.path)


class Storage(ABC):
    """Byte-level access to one dataset directory."""

    #: whether :meth:`put_if_absent` is atomic (exactly one of several racing writers succeeds)
    atomic_put: bool = True
    #: how many reads (of different files) are worth having in flight at once: a remote store
    #: answers each request after a latency that concurrent requests overlap. 0 where reads cost
    #: work rather than waiting (local disk, memory): as many as there are worker threads.
    read_parallelism: int = 0
    #: whether commits keep ``_versions/latest_version_hint.json`` up to date. pylance writes it
    #: on local disk only: on an object store it neither writes nor reads it (nobody trusts a
    #: hint; readers list ``_versions``), and a commit there saves a PUT without it.
    keeps_version_hint: bool = True
    #: whether readers of this storage's data files and decoded deletion vectors go into the
    #: process-wide caches (False: a handle opened with ``metadata_cache_size_bytes=0``)
    cache_metadata: bool = True

    def __init__(self, uri: str, *, access: str = "") -> None:
        self.uri = uri
        #: what process-wide caches of this storage's files are keyed by: the URI and a digest of
        #: everything else that decides access (credentials, endpoint, ...), never a secret itself
        self.cache_key = f"{uri}#{access}" if access else uri
        #: the options the storage was opened with (a pickled dataset handle opens it again with them)
        self.storage_options: dict[str, Any] = {}
        #: pylance's ``base_store_params``: the storage options of other base paths, by base path
        #: URI (runtime only, never stored; see :mod:`lance_table.table.base_storage`)
        self.base_store_params: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"

    @abstractmethod
    def read(self, path: str) -> bytes:
        """A whole file. Raises FileNotFoundError."""

    @abstractmethod
    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """Byte ranges of a file, each as ``(offset, length)``."""

    @abstractmethod
    def size(self, path: str) -> int:
        """Size in bytes. Raises FileNotFoundError."""

    @abstractmethod
    def source(self, path: str, size: int | None = None) -> ByteSource:
        """A byte source for the file codec's reader.

        ``size`` is what the caller was told the size is (a manifest's ``file_size_bytes``); remote
        backends use it instead of asking the store. A file of another size raises CorruptFileError
        saying that the manifest and the file disagree: at once where the real size costs nothing
        (local disk, memory), at the first read that runs past the file's end elsewhere.
        """

    @abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Create or replace a file with ``data``."""

    def write_new(self, path: str, data: bytes) -> None:
        """Create a file that nobody reads before it is complete (a fresh unique name, referenced
        only once written): where it is cheaper, without :meth:`write`'s atomic replacement.

        Raises:
            FileExistsError: where the backend can tell, the file already exists.
        """
        self.write(path, data)

    def write_hint(self, path: str, data: bytes) -> None:
        """Update a small file that readers never trust (a hint): where it is cheaper, in place."""
        self.write(path, data)

    @abstractmethod
    def open_writer(self, path: str) -> IO[bytes]:
        """A writable binary stream; the file appears complete when the stream is closed."""

    def open_staged(self, path: str) -> StagedFile:
        """A writer whose file appears at ``path`` only once published (see :class:`StagedFile`)."""
        return StagedFile(self, path, self.open_writer(path))

    @abstractmethod
    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` only if it does not exist, atomically.

        Raises:
            FileExistsError: the file already exists (another writer won).
        """

    @abstractmethod
    def list_dir(self, path: str, *, stat: bool = True) -> list[Entry]:
        """Files directly inside a directory (none if it does not exist).

        With ``stat=False`` a backend may leave sizes at -1 and times unknown when that is cheaper.
        """

    def list_created_files(self, path: str) -> Sequence[Entry]:
        """:meth:`list_dir` (with sizes and times) of a directory whose files are only ever
        created whole and removed, never changed in place (``_versions``): a backend may then
        answer from its last listing while the directory is provably unchanged (with the very
        same sequence: callers must not change it)."""
        return self.list_dir(path)

    def list_names(self, path: str) -> list[str]:
        """The names of the files directly inside a directory (none if it does not exist), in no
        particular order: the cheapest listing."""
        return [e.name for e in self.list_dir(path, stat=False)]

    def list_names_page(
        self, path: str, *, start_after: str = "", limit: int = 1000
    ) -> tuple[list[str], str | None] | None:
        """One page of the names of the files directly inside a directory, in lexical order: at
        most ``limit`` names, those after ``start_after``; and the name to start the next page
        after (None when this page is the last). None where the store does not list in order
        (a local disk lists a whole directory at once: :meth:`list_names` is its cheapest listing).

        Object stores list in lexical order, a page per request: a reader that needs only the
        first names of a long directory (the newest versions, whose V2 names sort first) stops
        after a page or two.
        """
        return None

    def change_token(self, path: str) -> Hashable | None:
        """What identifies the state of a file or directory now, where the store can tell it
        with one cheap call (a ``stat`` of a local file system whose directory times the kernel
        keeps): a later token that differs means it changed since. An equal one means it did not,
        short of a change made within the same tick of the file system's clock as the last change
        before the first token (times are that coarse). None where the store cannot tell (object
        stores, network file systems) or the path does not exist."""
        return None

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove a file; a missing file is not an error."""

    def delete_many(self, paths: Sequence[str]) -> None:
        """Remove files; missing ones are not an error. One call of :meth:`delete` each here; an
        object store that removes many files in one request overrides this."""
        for path in paths:
            self.delete(path)

    @abstractmethod
    def exists(self, path: str) -> bool:
        """Whether a file exists."""

    def list_tree(self, path: str) -> list[Entry]:
        """Files anywhere below a directory."""
        out: list[Entry] = []
        for e in self.list_dir(path):
            out.append(e)
        return out
