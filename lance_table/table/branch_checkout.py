"""Opening a version of a branch: ``(branch, version)`` references as pylance takes them (see
:mod:`lance_table.table.branch_refs` for where a branch lives)."""

from __future__ import annotations

from typing import Any

from lance_table.table.branch_refs import branch_storage
from lance_table.table.snapshot import Snapshot, load


def checkout_reference(snapshot: Snapshot, reference: Any) -> Snapshot:
    """The version ``reference`` names: a number or tag (on this handle's branch) or
    ``(branch, version)`` (None: the main branch; its latest version).

    Raises:
        BranchError: the branch does not exist.
        VersionNotFoundError, TagError: the version or tag does not resolve.
        TypeError: a branch reference's version is not an integer.
    """
    if isinstance(reference, tuple) and len(reference) == 2:
        branch, version = reference
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise TypeError(f"a branch reference's version is an integer or None, not {version!r}")
        return load(branch_storage(snapshot.storage, branch), version, None, snapshot.commit_options)
    return snapshot.checkout(reference)


__all__ = ["branch_storage", "checkout_reference"]
