"""pylance's ``Session``: what a dataset handle keeps in memory between reads.

lance_table's caches belong to the process, not to a handle: the parsed footers and column
metadata of data files (``readers.READERS``) and decoded deletion vectors (``deletion.DELETIONS``)
are shared by every handle, each bounded in entries and bytes. A :class:`Session` reports them; all
sessions are the same one. There is no index cache (lance_table reads no index files).
"""

from __future__ import annotations

from typing import Any

from lance_table.table.deletion import DELETIONS
from lance_table.table.readers import READERS


class Session:
    """The caches a dataset handle reads through (pylance's ``Session``; see the module).

    ``index_cache_size_bytes``, ``metadata_cache_size_bytes`` and the cache backends size pylance's
    caches; they are accepted and change nothing here (the process's caches have their own bounds).

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

    def size_bytes(self) -> int:
        """The estimated memory of what the caches hold now."""
        return READERS.nbytes + DELETIONS.nbytes

    def index_cache_size_bytes(self) -> int:
        """What the index cache holds: always 0 (no index files are read)."""
        return 0

    def is_same_as(self, other: object) -> bool:
        """Whether ``other`` is a session over the same caches (every session is)."""
        return isinstance(other, Session)

    def __repr__(self) -> str:
        return f"Session(index_cache_size_bytes=0, metadata_cache_size_bytes={self.size_bytes()})"


__all__ = ["Session"]
