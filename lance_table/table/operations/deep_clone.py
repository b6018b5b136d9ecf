"""Deep clones (pylance's ``deep_clone``): a new dataset whose first version is a version of
another dataset (or of one of its branches), with every data, deletion and index file of that
version copied into the new dataset's own directory.

The clone stands alone: its manifest registers no base path and no file keeps a ``base_id``; the
version number is the source's and the transaction is a ``Clone`` (not shallow), as pylance
writes it. Files are copied first and the manifest written last, so a failed clone leaves no
dataset (only files that the next ``cleanup_old_versions`` of the target, or a retry, handles).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lance_table._lazy import version as library_version
from lance_table._parallel import IO, map_on
from lance_table.errors import DatasetAlreadyExistsError
from lance_table.format import paths
from lance_table.format.bases import base_paths, with_base_paths
from lance_table.format.manifest import WRITER_LIBRARY, Fragment
from lance_table.format.manifest_file import encode_manifest_file
from lance_table.format.transaction import Clone, Transaction
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.base_storage import base_storage, data_dir
from lance_table.table.commit import CommitOptions
from lance_table.table.indices import decode_section, encode_section
from lance_table.table.operations.clone import set_branch
from lance_table.table.snapshot import Snapshot


def _copies(src: Snapshot) -> list[tuple[Storage, str, str]]:
    """(storage to read from, path there, path in the clone) of every file the version needs."""
    bases = base_paths(src.manifest)

    def where(base_id: int | None, what: str) -> Storage:
        return src.storage if base_id is None else base_storage(src.storage, bases, base_id, what)

    out = []
    for frag in src.manifest.fragments:
        for f in frag.files:
            path = f"{data_dir(bases, f.base_id)}/{f.path}".lstrip("/")
            out.append((where(f.base_id, "data file"), path, paths.data_file_path(f.path)))
        d = frag.deletion_file
        if d is not None:
            out.append((where(d.base_id, "deletion file"), d.path(frag.id), d.path(frag.id)))
    for idx in decode_section(src.manifest.index_section):
        base_id = idx.base_id if idx.HasField("base_id") else None
        store = where(base_id, "index")
        directory = f"{paths.INDICES_DIR}/{uuid.UUID(bytes=idx.uuid.uuid)}"
        out += [(store, e.path, e.path) for e in store.list_tree(directory)]
    return out


def _local(frag: Fragment) -> Fragment:
    files = tuple(replace(f, base_id=None) for f in frag.files)
    deletion = None if frag.deletion_file is None else replace(frag.deletion_file, base_id=None)
    return replace(frag, files=files, deletion_file=deletion)


def _local_indices(section: bytes | None) -> bytes | None:
    indices = decode_section(section)
    for idx in indices:
        idx.ClearField("base_id")
    return encode_section(indices) if indices else section


def deep_clone(
    src: Snapshot,
    target: str | os.PathLike[str],
    tag: str | None,
    storage_options: Mapping[str, Any] | None = None,
) -> Snapshot:
    """Copy version ``src`` (reached through tag ``tag``, if any) into a new dataset at
    ``target``; return the clone's first version.

    Raises:
        DatasetAlreadyExistsError: a dataset exists at ``target``.
        DataFileNotFoundError, FileNotFoundError: a file of the version is missing.
        UnsupportedFormatError: the version needs writer features lance_table lacks.
    """
    versions.check_writable(src.manifest, src.uri)
    storage = open_storage(target, storage_options)
    if versions.list_versions(storage):
        raise DatasetAlreadyExistsError(f"a dataset exists at {storage.uri}: deep_clone needs a new location")
    map_on(IO, lambda c: storage.write(c[2], c[0].read(c[1])), _copies(src))
    txn = Transaction(src.version, Clone(False, tag, src.version, src.uri))
    m = src.manifest
    manifest = replace(
        m,
        fragments=tuple(_local(f) for f in m.fragments),
        index_section=_local_indices(m.index_section),
        transaction_file=paths.transaction_file_name(txn.read_version, txn.uuid),
        timestamp_ns=max(time.time_ns(), m.timestamp_ns + 1),
        writer_library=WRITER_LIBRARY,
        writer_version=library_version(),
        tag="",
    )
    manifest = set_branch(with_base_paths(manifest, ()), None).with_flags()
    txn_bytes = txn.to_bytes()
    storage.write_new(paths.transaction_path(manifest.transaction_file), txn_bytes)
    try:
        storage.put_if_absent(
            paths.manifest_path(manifest.version), encode_manifest_file(manifest, txn_bytes)
        )
    except FileExistsError:
        raise DatasetAlreadyExistsError(f"a dataset was created at {storage.uri} concurrently") from None
    versions.write_version_hint(storage, manifest.version)
    return Snapshot(storage, manifest, paths.ManifestNaming.V2, CommitOptions())


__all__ = ["deep_clone"]
