"""pylance's ``Session``: what a dataset handle keeps in memory between reads.

lance_table's caches belong to the process, not to a handle: the parsed footers and column
metadata of data files (``readers.READERS``) and decoded deletion vectors (``deletion.DELETIONS``)
are shared by every handle, each bounded in entries and bytes. A :class:`Session` reports them; all
sessions are the same one. There is no index cache (lance_table reads no index files).

One limit takes effect per handle: a handle opened with ``metadata_cache_size_bytes=0`` (or a
session made with it) caches nothing; it reads every footer and deletion file afresh, and its
session reports 0 bytes.
"""

from __future__ import annotations

from typing import Any

from lance_table._lru import clear_all
from lance_table.storage import Storage
from lance_table.table.deletion import DELETIONS
from lance_table.table.readers import READERS


class Session:
    """The caches a dataset handle reads through (pylance's ``Session``; see the module).

    ``index_cache_size_bytes`` and the cache backends size pylance's caches; they are accepted and
    change nothing here (the process's caches have their own bounds). ``metadata_cache_size_bytes=0``
    makes the handles using the session cache nothing (see the module).

    Example:
        ```python
        ds.to_table()
        print(ds.session().size_bytes(), ds.session())
        ```
    """

    def __init__(
        self,
        index_cache_size_bytes: int | None = None,
        metadata_cache_size_bytes: int | None = None,
        index_cache_backend: Any = None,
        metadata_cache_backend: Any = None,
    ) -> None:
        self._options = (index_cache_size_bytes, metadata_cache_size_bytes)

    @property
    def caches_metadata(self) -> bool:
        """Whether handles using this session put file metadata in the process's caches."""
        return self._options[1] != 0

    def size_bytes(self) -> int:
        """The estimated memory of what the caches hold now (0 for a session that caches nothing)."""
        return READERS.nbytes + DELETIONS.nbytes if self.caches_metadata else 0

    def index_cache_size_bytes(self) -> int:
        """What the index cache holds: always 0 (no index files are read)."""
        return 0

    def is_same_as(self, other: object) -> bool:
        """Whether ``other`` is a session over the same caches (every session is)."""
        return isinstance(other, Session)

    def __repr__(self) -> str:
        return f"Session(index_cache_size_bytes=0, metadata_cache_size_bytes={self.size_bytes()})"


def apply_cache_limits(storage: Storage, metadata_cache_size_bytes: int | None, session: Any) -> None:
    """Make a handle's storage bypass the process's caches when its metadata cache is to hold
    nothing (``metadata_cache_size_bytes=0``, or a :class:`Session` made with it)."""
    if metadata_cache_size_bytes == 0 or (isinstance(session, Session) and not session.caches_metadata):
        storage.cache_metadata = False


def session_of(storage: Storage) -> Session:
    """The session a handle over ``storage`` reads through."""
    return Session() if storage.cache_metadata else Session(metadata_cache_size_bytes=0)


def clear_caches() -> int:
    """Forget everything lance_table keeps in memory between calls, in every handle of the process:
    readers (parsed footers and column metadata), decoded deletion vectors, manifests, fragments,
    version summaries, listings and parsed layouts -- the state of a fresh process, so that the next
    open, read or commit pays what a first one pays (benchmarks that compare cold operations).
    Files and datasets are untouched; handles stay usable and refill the caches as they read.
    Returns the number of caches cleared.
    """
    return clear_all()


__all__ = ["Session", "apply_cache_limits", "clear_caches", "session_of"]
