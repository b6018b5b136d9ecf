"""Shallow clones (pylance's ``shallow_clone``): a new dataset whose first version is a version of
another dataset, with that dataset's data, deletion and index files referenced where they are.

As pylance writes one: the clone's first version has the number of the version cloned; the source
dataset is registered as a base path (``is_dataset_root``, no name; id 0, or one above the highest
id when 0 is taken) and every file of the dataset's own gets its ``base_id``; the source's other
bases are kept; the transaction is a ``Clone``. Writes to the clone go to the clone's own
directory, and its cleanup never touches the source (whose cleanup, as in pylance, does not know
about clones: clone from a tagged version to keep its files).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lance_table._lazy import version as library_version
from lance_table._proto import table_pb2
from lance_table.errors import DatasetAlreadyExistsError
from lance_table.format import paths
from lance_table.format.bases import DatasetBasePath, base_paths, with_base_paths
from lance_table.format.manifest import WRITER_LIBRARY, Fragment, Manifest
from lance_table.format.manifest_file import encode_manifest_file
from lance_table.format.transaction import Clone, Transaction
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.branch_checkout import checkout_reference
from lance_table.table.commit import CommitOptions
from lance_table.table.indices import decode_section, encode_section
from lance_table.table.snapshot import Snapshot

MAIN_BRANCH = "main"


def _reference(reference: Any) -> tuple[str | None, int | str | None]:
    """(tag name, version or tag to open) of pylance's ``reference``: a version number, a tag, or
    ``(branch, version)`` (opened by :func:`lance_table.table.branch_checkout.checkout_reference`).

    Raises:
        TypeError: a reference of no such kind.
    """
    if isinstance(reference, bool):
        raise TypeError(f"reference must be a version, a tag or (branch, version), got {reference!r}")
    if isinstance(reference, int):
        return None, reference
    if isinstance(reference, str):
        return reference, reference
    if isinstance(reference, tuple) and len(reference) == 2:
        return None, None
    raise TypeError(f"reference must be a version, a tag or (branch, version), got {reference!r}")


def _in_base(frag: Fragment, base_id: int) -> Fragment:
    """``frag`` with its files of the dataset's own marked as living in base ``base_id``."""
    files = tuple(f if f.base_id is not None else replace(f, base_id=base_id) for f in frag.files)
    deletion = frag.deletion_file
    if deletion is not None and deletion.base_id is None:
        deletion = replace(deletion, base_id=base_id)
    return replace(frag, files=files, deletion_file=deletion)


def _indices_in_base(section: bytes | None, base_id: int) -> bytes | None:
    indices = decode_section(section)
    for idx in indices:
        if not idx.HasField("base_id"):
            idx.base_id = base_id
    return encode_section(indices) if indices else section


def shallow_clone(
    source: Snapshot,
    target: str | os.PathLike[str],
    reference: Any,
    storage_options: Mapping[str, Any] | None = None,
) -> Snapshot:
    """Clone version ``reference`` of ``source`` into a new dataset at ``target`` without copying
    files; return the clone's first version.

    Raises:
        VersionNotFoundError: the version does not exist.
        TagError: the tag does not exist.
        DatasetAlreadyExistsError: a dataset exists at ``target``.
        BranchError: the branch does not exist.
        UnsupportedFormatError: the version needs writer features lance_table lacks.
    """
    tag, _ = _reference(reference)
    src = checkout_reference(source, reference)
    storage = open_storage(target, storage_options)
    return write_first_version(src, storage, tag)


def write_first_version(
    src: Snapshot,
    storage: Storage,
    tag: str | None,
    branch: str | None = None,
    *,
    base_name: str | None = None,
) -> Snapshot:
    """Write version ``src`` as the first version of the new dataset at ``storage``, its files
    referenced where they are (see the module); ``branch``: the name of the branch the new
    dataset is (set in the manifest and the ``Clone`` transaction, as pylance's branches);
    ``base_name``: the name the source's directory is registered under (pylance names a parent
    branch's directory after the branch).

    Raises:
        DatasetAlreadyExistsError: a dataset exists at ``storage``.
        UnsupportedFormatError: the version needs writer features lance_table lacks.
    """
    versions.check_writable(src.manifest, src.uri)
    if versions.list_versions(storage):
        raise DatasetAlreadyExistsError(f"a dataset exists at {storage.uri}: a clone needs a new location")
    bases = base_paths(src.manifest)
    root = 0 if 0 not in bases else max(bases) + 1
    bases[root] = DatasetBasePath(src.uri, base_name, True, root)
    txn = Transaction(src.version, Clone(True, tag, src.version, src.uri, branch))
    m = src.manifest
    manifest = replace(
        m,
        fragments=tuple(_in_base(f, root) for f in m.fragments),
        index_section=_indices_in_base(m.index_section, root),
        transaction_file=paths.transaction_file_name(txn.read_version, txn.uuid),
        timestamp_ns=max(time.time_ns(), m.timestamp_ns + 1),
        writer_library=WRITER_LIBRARY,
        writer_version=library_version(),
        tag="",
    )
    manifest = set_branch(with_base_paths(manifest, bases.values()), branch).with_flags()
    txn_bytes = txn.to_bytes()
    txn_path = paths.transaction_path(manifest.transaction_file)
    storage.write_new(txn_path, txn_bytes)
    try:
        storage.put_if_absent(
            paths.manifest_path(manifest.version), encode_manifest_file(manifest, txn_bytes)
        )
    except FileExistsError:
        storage.delete(txn_path)
        raise DatasetAlreadyExistsError(f"a dataset was created at {storage.uri} concurrently") from None
    versions.write_version_hint(storage, manifest.version)
    return Snapshot(storage, manifest, paths.ManifestNaming.V2, CommitOptions())


def set_branch(manifest: Manifest, branch: str | None) -> Manifest:
    """``manifest`` with its ``branch`` field set (cleared for None: a clone is its own main)."""
    pb = table_pb2.Manifest()
    if manifest.passthrough:
        pb.MergeFromString(manifest.passthrough)
    if branch is None:
        pb.ClearField("branch")
    else:
        pb.branch = branch
    return replace(manifest, passthrough=pb.SerializeToString())
