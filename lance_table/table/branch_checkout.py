"""Opening a version of a branch: ``(branch, version)`` references as pylance takes them (see
:mod:`lance_table.table.branch_refs` for where a branch lives)."""

from __future__ import annotations

from typing import Any

from lance_table.errors import BranchError
from lance_table.storage import Storage, open_storage
from lance_table.table.branch_refs import MAIN_BRANCH, branch_path, locate, tree_uri
from lance_table.table.snapshot import Snapshot, load


def branch_storage(storage: Storage, branch: str | None) -> Storage:
    """The storage of ``branch`` (None or ``"main"``: the root) of the dataset ``storage`` is in.

    Raises:
        BranchError: there is no such branch.
    """
    root, _ = locate(storage)
    if branch in (None, MAIN_BRANCH):
        return root
    assert branch is not None
    if not root.exists(branch_path(branch)):
        raise BranchError(f"branch {branch!r} of {root.uri} does not exist")
    out = open_storage(tree_uri(root.uri, branch), root.storage_options)
    out.base_store_params = storage.base_store_params
    return out


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
