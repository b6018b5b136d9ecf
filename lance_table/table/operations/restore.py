"""Restore: make an old version the latest again, as a new version on top of the latest."""

from __future__ import annotations

from lance_table.format.transaction import Restore
from lance_table.table.commit import Pending
from lance_table.table.snapshot import Snapshot


def plan_restore(old: Snapshot, latest: Snapshot) -> Pending:
    """What to commit on top of ``latest`` to bring ``old`` back.

    The commit pins ``old`` against a concurrent cleanup before it reads it again, and fails with
    ``VersionNotFoundError`` if cleanup removed it first.
    """
    return Pending(Restore(old.version), latest.version)
