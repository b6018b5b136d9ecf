"""pylance's ``lance.commit``: the conflict error a commit raises and the commit lock's type."""

from __future__ import annotations

from lance_table.errors import CommitConflictError
from lance_table.table.commit import CommitLock

__all__ = ["CommitConflictError", "CommitLock"]
