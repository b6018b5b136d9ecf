"""Restore: make an old version the latest again, as a new version on top of the latest."""

from __future__ import annotations

from lance_table.format import paths
from lance_table.format.transaction import Restore
from lance_table.table.commit import Pending
from lance_table.table.snapshot import Snapshot


def plan_restore(old: Snapshot, latest: Snapshot | None = None) -> Pending:
    """What to commit on top of ``latest`` to bring ``old`` back; without ``latest``, what to
    commit with :meth:`Snapshot.commit_on_latest` (which finds the latest version itself).

    The commit pins ``old`` against a concurrent cleanup before it reads it again, and fails with
    ``VersionNotFoundError`` if cleanup removed it first.
    """
    return Pending(Restore(old.version), (latest or old).version)


def restore_version(old: Snapshot, message: str | None = None) -> Snapshot:
    """Commit ``old`` again as the newest version; the version made.

    The commit finds the latest version itself, in the one listing it makes once its transaction
    file is written (see :meth:`Snapshot.commit_on_latest`): the cost does not grow with the
    history. A detached version is restored on top of the main line's latest version.

    Raises:
        VersionNotFoundError: ``old`` has been cleaned up.
        CommitConflictError, CommitError: see :meth:`Snapshot.commit`.
    """
    if paths.is_detached_version(old.version):
        latest = old.checkout()
        return latest.commit(plan_restore(old, latest), message=message)
    return old.commit_on_latest(plan_restore(old), message=message)
