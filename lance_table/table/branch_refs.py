"""Branch refs as pylance 14 stores them, and which versions they keep alive.

A branch ``name`` of the dataset at ``<root>`` is:

- a ref file ``<root>/_refs/branches/<name, percent-encoded>.json`` (``a/b`` is ``a%2Fb.json``):
  ``{"parentBranch": null | "<branch>", "identifier": {"version_mapping": [[version, "<uuid
  hex>"], ...]}, "parentVersion": n, "createAt": unix seconds, "manifestSize": bytes,
  "metadata": {...}}``. The identifier is the branch's lineage: its parent's identifier plus
  ``[parentVersion, <a new uuid>]`` (the main branch's identifier is empty), so entry ``k`` names
  the version of the ``k``-th ancestor the branch descends from;
- a dataset directory ``<root>/tree/<name>`` (``a/b`` is ``tree/a/b``) whose first version is a
  shallow clone of the parent's version ``parentVersion``: the same number, the parent's files
  referenced through a base path on the root (``is_dataset_root``), the manifest's ``branch``
  field set to the name and a ``Clone`` transaction naming the branch. The branch's own writes
  go to its own directory.

A branch reads files of its parent's version it was created from, so cleanup of the parent must
keep that version (:func:`referenced_versions`), as pylance's cleanup does.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypedDict
from urllib.parse import quote, unquote

from lance_table.errors import BranchError, CorruptFileError
from lance_table.storage import Storage, open_storage

BRANCHES_DIR = "_refs/branches"
TREE_DIR = "tree"
MAIN_BRANCH = "main"
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")


class Branch(TypedDict):
    """pylance's ``Branch``: what ``ds.branches.list()`` says of a branch (the branch it was
    created from, None for main; its lineage; the version it was created from; the creation time
    in Unix seconds; the size of that version's manifest; its metadata).

    Example:
        ```python
        ds.create_branch("experiment")
        branch = ds.branches.list()["experiment"]
        print(branch["parent_branch"], branch["parent_version"])  # None 1
        ```
    """

    parent_branch: str | None
    branch_identifier: list[tuple[int, str]]
    parent_version: int
    create_at: int
    manifest_size: int
    metadata: dict[str, str]


def branch_path(name: str) -> str:
    """The ref file of branch ``name``, relative to the dataset root."""
    return f"{BRANCHES_DIR}/{quote(name, safe='')}.json"


def tree_uri(root_uri: str, name: str) -> str:
    """The directory of branch ``name``'s versions."""
    return f"{root_uri.rstrip('/')}/{TREE_DIR}/{name}"


def check_branch_name(name: object) -> str:
    """``name`` if pylance would create a branch of that name.

    Raises:
        ValueError: (as :class:`~lance_table.errors.BranchError`) the name is ``main``, empty, has
            ``..``, a backslash, an empty segment or characters other than letters, digits, ``.``,
            ``-``, ``_`` (and ``/`` between segments).
    """
    if not isinstance(name, str) or not name:
        raise BranchError(f"a branch name must be a non-empty string, not {name!r}")
    if name == MAIN_BRANCH:
        raise BranchError('"main" is reserved for the default branch; use a different branch name')
    if ".." in name or "\\" in name:
        raise BranchError(f"branch name {name!r} cannot contain '..' or '\\'")
    for segment in name.split("/"):
        if not _SEGMENT.fullmatch(segment):
            raise BranchError(
                f"branch name {name!r}: segment {segment!r} may only hold letters, digits, '.', '-', '_'"
            )
    return name


def parse_branch(data: bytes, where: str) -> dict[str, Any]:
    """One ref file as pylance's ``Branch`` dict (``parent_branch``, ``branch_identifier``,
    ``parent_version``, ``create_at``, ``manifest_size``, ``metadata``).

    Raises:
        CorruptFileError: naming ``where``, when the file is not a branch ref as pylance writes it.
    """
    try:
        body = json.loads(data)
        if not isinstance(body, dict):
            raise ValueError("a branch file holds a JSON object")
        mapping = (body.get("identifier") or {}).get("version_mapping") or []
        lineage = [(int(v), str(u)) for v, u in mapping]
        parent = body.get("parentBranch")
        version = body.get("parentVersion")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"parentVersion {version!r} is not a version")
        if parent is not None and not isinstance(parent, str):
            raise ValueError(f"parentBranch {parent!r} is not a name")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValueError("metadata is not an object")
        return {
            "parent_branch": parent,
            "branch_identifier": lineage,
            "parent_version": version,
            "create_at": int(body.get("createAt", 0)),
            "manifest_size": int(body.get("manifestSize", 0)),
            "metadata": {str(k): str(v) for k, v in metadata.items()},
        }
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise CorruptFileError(where, f"branch file is not valid ({exc})") from None


def encode_branch(branch: dict[str, Any]) -> bytes:
    """A ref file's bytes, as pylance writes them."""
    body = {
        "parentBranch": branch["parent_branch"],
        "identifier": {"version_mapping": [list(e) for e in branch["branch_identifier"]]},
        "parentVersion": branch["parent_version"],
        "createAt": branch["create_at"],
        "manifestSize": branch["manifest_size"],
        "metadata": dict(branch["metadata"]),
    }
    return json.dumps(body, indent=2).encode()


def list_branches(root: Storage) -> dict[str, dict[str, Any]]:
    """Every branch of the dataset at ``root``, by name.

    Raises:
        CorruptFileError: a ref file is damaged.
    """
    out: dict[str, dict[str, Any]] = {}
    for entry in root.list_dir(BRANCHES_DIR, stat=False):
        if not entry.name.endswith(".json"):
            continue
        name = unquote(entry.name[: -len(".json")])
        path = f"{BRANCHES_DIR}/{entry.name}"
        try:
            data = root.read(path)
        except FileNotFoundError:  # deleted while listed
            continue
        out[name] = parse_branch(data, f"{root.uri.rstrip('/')}/{path}")
    return out


def locate(storage: Storage) -> tuple[Storage, str | None]:
    """The storage of the dataset root and the branch ``storage`` holds (None: the main branch).

    A directory ``<root>/tree/<name>`` is branch ``name`` when ``<root>`` has its ref file."""
    uri = storage.uri.rstrip("/")
    marker = f"/{TREE_DIR}/"
    start = uri.find(marker)
    while start >= 0:
        root_uri, name = uri[:start], uri[start + len(marker) :]
        if name:
            root = open_storage(root_uri, storage.storage_options)
            if root.exists(branch_path(name)):
                return root, name
        start = uri.find(marker, start + 1)
    return storage, None


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


def _identifier(branches: dict[str, dict[str, Any]], name: str | None) -> list[tuple[int, str]] | None:
    if name is None:
        return []
    branch = branches.get(name)
    return None if branch is None else list(branch["branch_identifier"])


def branches_referencing(storage: Storage) -> dict[str, int]:
    """The branches created from a version of the branch ``storage`` holds (and reading files of
    it), each with that version.

    A descendant is any branch whose lineage starts with this branch's; the entry after the
    shared part is the version it forked from. (A branch whose direct parent was deleted still
    keeps the version its lineage names.)

    Raises:
        CorruptFileError: a ref file is damaged (nothing may be deleted while it is unreadable).
    """
    root, me = locate(storage)
    branches = list_branches(root)
    mine = _identifier(branches, me)
    out: dict[str, int] = {}
    for name, branch in branches.items():
        if name == me:
            continue
        lineage = branch["branch_identifier"]
        if mine is not None and len(lineage) > len(mine) and lineage[: len(mine)] == mine:
            out[name] = lineage[len(mine)][0]
        elif branch["parent_branch"] in ((None, MAIN_BRANCH) if me is None else (me,)):
            out[name] = branch["parent_version"]
    return out


def referenced_versions(storage: Storage) -> dict[int, str]:
    """The versions of the branch ``storage`` holds that other branches were created from (see
    :func:`branches_referencing`), with the name of one such branch for messages.

    Raises:
        CorruptFileError: a ref file is damaged (nothing may be deleted while it is unreadable).
    """
    return {v: n for n, v in sorted(branches_referencing(storage).items(), reverse=True)}


__all__ = [
    "BRANCHES_DIR",
    "MAIN_BRANCH",
    "Branch",
    "branch_path",
    "branch_storage",
    "branches_referencing",
    "check_branch_name",
    "encode_branch",
    "list_branches",
    "locate",
    "parse_branch",
    "referenced_versions",
    "tree_uri",
]
