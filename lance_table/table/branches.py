"""Branches (pylance 14's ``ds.branches``, ``ds.create_branch``, ``checkout_version((branch,
version))``), stored as pylance stores them (see :mod:`lance_table.table.branch_refs`): a branch
created by either library is listed, read and written by the other.

A branch's directory ``<root>/tree/<name>`` is a dataset of its own whose first version
references its parent's files, so reading and writing a branch is reading and writing that
dataset; this module resolves references to it and keeps its ref file.

Creating a branch writes the ref file first (atomically: two creators of one name cannot both
win) and then the branch's first version, and checks afterwards that the parent's version still
exists: cleanup keeps versions that refs name and looks at the refs again after deleting
manifests, the order tags follow (see :mod:`lance_table.table.tags`), so a branch never ends up
naming files a cleanup deleted.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Mapping
from typing import Any

from lance_table.errors import BranchError, TagError
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.branch_checkout import branch_storage, checkout_reference
from lance_table.table.branch_refs import (
    MAIN_BRANCH,
    branch_path,
    check_branch_name,
    encode_branch,
    list_branches,
    locate,
    parse_branch,
    tree_uri,
)
from lance_table.table.operations.clone import write_first_version
from lance_table.table.snapshot import Snapshot, load
from lance_table.table.tags import Tags

_ORDERS = ("asc", "desc")


class Branches:
    """The dataset's branches (pylance's ``ds.branches``): ``list()``, ``list_ordered()``,
    ``delete()``, ``replace_metadata()``; create one with ``ds.create_branch``.

    Example:
        ```python
        feature = ds.create_branch("feature")  # a handle on the new branch
        feature.insert(table)  # written to the branch only
        print(list(ds.branches.list()), ds.count_rows(), feature.count_rows())
        ds.branches.delete("feature")
        ```
    """

    def __init__(self, storage: Storage) -> None:
        self._root, _ = locate(storage)

    def _where(self, name: str) -> str:
        return f"{self._root.uri.rstrip('/')}/{branch_path(name)}"

    def list(self) -> dict[str, dict[str, Any]]:
        """Every branch by name, as pylance's ``Branch`` dicts (``parent_branch``,
        ``branch_identifier``, ``parent_version``, ``create_at``, ``manifest_size``, ``metadata``).

        Raises:
            CorruptFileError: a branch file is damaged.
        """
        return list_branches(self._root)

    def list_ordered(self, order: str | None = None) -> builtins.list[tuple[str, dict[str, Any]]]:
        """The branches ordered by the version they were created from: newest first (``"desc"``,
        the default, as pylance) or oldest first (``"asc"``).

        Raises:
            ValueError: ``order`` is neither.
            CorruptFileError: a branch file is damaged.
        """
        if order is not None and order not in _ORDERS:
            raise ValueError(f"Invalid sort order {order!r}. Valid values are: asc, desc")
        return sorted(
            self.list().items(), key=lambda kv: (kv[1]["parent_version"], kv[0]), reverse=order != "asc"
        )

    def _read(self, name: str) -> dict[str, Any]:
        try:
            return parse_branch(self._root.read(branch_path(name)), self._where(name))
        except FileNotFoundError:
            raise BranchError(f"branch {name!r} does not exist") from None

    def delete(self, branch: str) -> None:
        """Delete a branch: its ref and its directory (its versions and the files it wrote).

        Raises:
            BranchError: there is no such branch, or another branch was created from it (delete
                that one first).
        """
        mine = self._read(branch)["branch_identifier"]
        everything = self.list()
        children = [
            n
            for n, b in everything.items()
            if n != branch and (b["parent_branch"] == branch or b["branch_identifier"][: len(mine)] == mine)
        ]
        if children:
            raise BranchError(f"branch {branch!r} is referenced by branches {children}; delete them first")
        self._root.delete(
            branch_path(branch)
        )  # first: a crash leaves unreferenced files, never a ref without them
        tree = open_storage(tree_uri(self._root.uri, branch), self._root.storage_options)
        # branches named "<branch>/..." live inside this one's directory: theirs stay
        inside = tuple(f"{n[len(branch) + 1 :]}/" for n in everything if n.startswith(f"{branch}/"))
        for entry in tree.list_tree(""):
            if not (inside and entry.path.startswith(inside)):
                tree.delete(entry.path)

    def replace_metadata(self, branch: str, metadata: Mapping[str, str]) -> None:
        """Replace a branch's metadata (string keys and values).

        Raises:
            BranchError: there is no such branch.
            TypeError: ``metadata`` is not a mapping of strings.
        """
        if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise TypeError(f"branch metadata must map strings to strings, not {metadata!r}")
        body = {**self._read(branch), "metadata": dict(metadata)}
        self._root.write(branch_path(branch), encode_branch(body))


def _source(snapshot: Snapshot, reference: Any) -> tuple[Snapshot, str | None, str | None]:
    """(the version to branch from, its branch name or None for main, the tag named or None)."""
    _, me = locate(snapshot.storage)
    if reference is None:
        return snapshot, me, None
    if isinstance(reference, tuple) and len(reference) == 2:
        branch = None if reference[0] in (None, MAIN_BRANCH) else reference[0]
        return checkout_reference(snapshot, reference), branch, None
    if isinstance(reference, str):
        root, _ = locate(snapshot.storage)
        try:
            tag = Tags(root).list()[reference]
        except KeyError:
            raise TagError(f"tag {reference!r} does not exist") from None
        return load(root, reference, None, snapshot.commit_options), tag.branch, reference
    return checkout_reference(snapshot, reference), me, None


def create_branch(
    snapshot: Snapshot,
    branch: str,
    reference: Any = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Snapshot:
    """Create branch ``branch`` from ``reference`` (None: this handle's version; a number or tag;
    ``(branch, version)``) and return the branch's first version.

    Raises:
        BranchError: the name is not allowed (``main``, bad characters) or the branch exists.
        VersionNotFoundError, TagError: the reference does not resolve.
    """
    check_branch_name(branch)
    src, parent, tag = _source(snapshot, reference)
    root, _ = locate(snapshot.storage)
    lineage = [] if parent is None else list(Branches(root)._read(parent)["branch_identifier"])
    size = versions.read_manifest_file(src.storage, versions.find_entry(src.storage, src.version)).size
    ref: dict[str, Any] = {
        "parent_branch": parent,
        "branch_identifier": [*lineage, (src.version, uuid.uuid4().hex)],
        "parent_version": src.version,
        "create_at": int(time.time()),
        "manifest_size": size,
        "metadata": {},
    }
    try:
        root.put_if_absent(branch_path(branch), encode_branch(ref))
    except FileExistsError:
        raise BranchError(f"branch {branch!r} of {root.uri} already exists") from None
    try:
        versions.find_entry(src.storage, src.version)  # still there: cleanup now keeps it
        options = root.storage_options if storage_options is None else storage_options
        storage = open_storage(tree_uri(root.uri, branch), options)
        return write_first_version(src, storage, tag, branch, base_name=parent)
    except BaseException:
        root.delete(branch_path(branch))
        raise


__all__ = ["Branches", "branch_storage", "checkout_reference", "create_branch"]
