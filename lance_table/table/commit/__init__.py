"""The one commit path: transaction file, catch up with the latest version, rebase, atomic create.

``protocol`` commits (and cleans up after itself on failure), ``conflicts`` decides how an operation
rebases over each kind of concurrent operation, and ``apply`` builds the next manifest.
"""

from __future__ import annotations

from lance_table.table.commit.conflicts import Pending
from lance_table.table.commit.protocol import (
    CommitLock,
    CommitOptions,
    check_can_commit,
    check_rebasable,
    commit,
    discard_elsewhere,
)

__all__ = [
    "CommitLock",
    "CommitOptions",
    "Pending",
    "check_can_commit",
    "check_rebasable",
    "commit",
    "discard_elsewhere",
]
