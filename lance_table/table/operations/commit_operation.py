"""Committing a ``LanceOperation`` built by hand (pylance's ``LanceDataset.commit``): check it against
the version it names, turn it into the format's operation, and send it through the one commit path.

Unlike pylance, which trusts the caller, the fragments are checked before anything is written:
their data files must exist in this dataset with the rows and field types the metadata claims, in
the dataset's data format. A refused commit writes nothing, so the dataset stays as it was.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import (
    DatasetNotFoundError,
    UnsupportedFormatError,
    UnsupportedOperationError,
)
from lance_table.format.bases import BasePath
from lance_table.format.manifest import Fragment, data_format_of
from lance_table.format.row_ids import RowMeta
from lance_table.format.transaction import Append, Delete, Rewrite, RewriteGroup
from lance_table.format.transaction import Overwrite as OverwriteOp
from lance_table.schema import LanceField
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.commit import CommitOptions, Pending, check_can_commit, check_rebasable, commit
from lance_table.table.commit.detached import check_attachable, check_detachable, commit_detached
from lance_table.table.commit.row_ids import carried_row_ids, uses_stable_row_ids
from lance_table.table.deletion import read_deletions
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.lance_schema import as_lance_schema
from lance_table.table.operations.check_fragments import check_fragments
from lance_table.table.operations.commit_inplace import plan_inplace
from lance_table.table.operations.manifest_paths import scheme_for_new_dataset
from lance_table.table.operations.restore import plan_restore
from lance_table.table.operations.write import plan_write, writable_data_format
from lance_table.table.operations.write_bases import plan_bases
from lance_table.table.snapshot import Snapshot, load


def commit_storage(
    target: str | os.PathLike[str] | Snapshot,
    storage_options: Mapping[str, Any] | None,
    base_store_params: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[Storage, CommitOptions]:
    """Where ``LanceDataset.commit`` commits: a handle's storage and commit settings (with
    ``base_store_params`` instead of its own when given), or the storage at a URI.

    Raises:
        StorageOptionsError: a storage option or ``base_store_params`` is refused.
    """
    if isinstance(target, Snapshot):
        storage = target.storage
        if base_store_params is not None:
            storage = open_storage(target.uri, storage.storage_options, base_store_params)
        return storage, target.commit_options
    return open_storage(target, storage_options, base_store_params), CommitOptions()


def commit_operation(
    storage: Storage,
    operation: LanceOperation.BaseOperation | Transaction,
    read_version: int | None,
    options: CommitOptions,
    message: str | None = None,
    *,
    v2_manifest_paths: bool | None = None,
    stable_row_ids: bool = False,
    detached: bool = False,
) -> Snapshot:
    """Commit ``operation`` (planned against ``read_version``); return the version it made.

    ``v2_manifest_paths`` and ``stable_row_ids`` apply to a dataset an Overwrite creates.
    ``detached``: make a detached version instead (see :mod:`lance_table.table.commit.detached`).

    Raises:
        TypeError: ``operation`` is not a LanceOperation or Transaction.
        ValueError: no ``read_version`` for an operation that needs one; new fragments with
            deletion files.
        UnsupportedOperationError: an operation lance_table does not commit.
        DatasetNotFoundError: no dataset, and the operation is not an Overwrite.
        VersionNotFoundError: ``read_version`` (or a Restore's version) does not exist.
        DataFileNotFoundError: a fragment's data file is not in the dataset.
        SchemaError: fragments hold fields the schema does not have, or of other types.
        CorruptFileError: a data file holds another number of rows than its fragment says.
        UnsupportedFormatError: fragments in another data format than the dataset's.
        DetachedCommitError: ``detached`` on a dataset with V1 manifest names or no dataset; an
            attached commit whose ``read_version`` is detached.
        CommitConflictError, CommitError: as for every commit.
    """
    properties: dict[str, str] = {}
    txn_uuid = None
    if isinstance(operation, Transaction):
        if message is not None:
            raise ValueError("commit_message is not taken with a Transaction: set it in its properties")
        read_version, properties = operation.read_version, dict(operation.transaction_properties or {})
        txn_uuid, operation = operation.uuid, operation.operation
    if not isinstance(operation, LanceOperation.BaseOperation):
        raise TypeError(f"operation must be a LanceOperation or Transaction, got {type(operation)}")
    if not dataclasses.is_dataclass(operation):
        raise UnsupportedOperationError(
            f"LanceOperation.{type(operation).__name__} is not supported by lance_table; it commits "
            "Overwrite, Append, Delete, Rewrite, Restore, Merge, Update, Project, UpdateConfig and "
            "DataReplacement"
        )
    replaces = isinstance(operation, (LanceOperation.Overwrite, LanceOperation.Restore))
    if read_version is None and not replaces:
        raise ValueError("read_version is required for all operations except Overwrite and Restore")
    check_can_commit(options, storage)
    if isinstance(operation, LanceOperation.Overwrite):
        new = NewDataset(scheme_for_new_dataset(v2_manifest_paths), stable_row_ids, detached)
        return _overwrite(storage, operation, read_version, options, message, properties, txn_uuid, new)
    if not detached:
        check_attachable(read_version, storage.uri)
    base = load(storage, read_version, options=options)
    versions.check_writable(base.manifest, storage.uri)
    if detached:
        check_detachable(base.manifest, base.scheme, storage.uri)
    if isinstance(operation, LanceOperation.Restore):
        base = base.checkout()  # a restore applies on top of the latest version
        pending = plan_restore(base.checkout(operation.version), base)
    elif isinstance(operation, LanceOperation.Append):
        frags = _new_fragments(base, operation.fragments)
        pending = Pending(Append(frags), base.version)
    elif isinstance(operation, LanceOperation.Delete):
        pending = _delete(base, operation)
    elif isinstance(operation, LanceOperation.Rewrite):
        pending = _rewrite(base, operation)
    elif (inplace := plan_inplace(base, operation)) is not None:
        pending = inplace
    else:  # pragma: no cover - every dataclass operation is handled above
        raise UnsupportedOperationError(f"LanceOperation.{type(operation).__name__} is not supported")
    shared = {"options": options, "properties": properties, "message": message, "txn_uuid": txn_uuid}
    if detached:
        manifest = commit_detached(storage, base.manifest, pending, **shared)
    else:
        check_rebasable(storage, pending)
        manifest = commit(storage, base.manifest, pending, scheme=base.scheme, **shared)
    return Snapshot(storage, manifest, base.scheme, options)


@dataclass(frozen=True)
class NewDataset:
    """How a dataset an Overwrite creates is set up: its manifest naming scheme and row ids; and
    whether the Overwrite is a detached commit."""

    scheme: str
    stable_row_ids: bool
    detached: bool = False


def _overwrite(
    storage: Storage,
    op: LanceOperation.Overwrite,
    read_version: int | None,
    options: CommitOptions,
    message: str | None,
    properties: dict[str, str],
    txn_uuid: str | None,
    new_dataset: NewDataset,
) -> Snapshot:
    lance_schema = as_lance_schema(op.new_schema)
    new_schema = lance_schema.to_pyarrow() if lance_schema is not None else op.new_schema
    if not isinstance(new_schema, pa.Schema):
        raise TypeError(
            f"Overwrite.new_schema must be a pyarrow.Schema or LanceSchema, got {type(new_schema)}"
        )
    if not new_dataset.detached:
        check_attachable(read_version, storage.uri)
    try:
        base: Snapshot | None = load(storage, read_version, options=options)
    except DatasetNotFoundError:
        base = None
    if new_dataset.detached:
        check_detachable(base.manifest if base else None, base.scheme if base else None, storage.uri)
    initial = plan_bases(base.manifest if base else None, "overwrite", op.initial_bases, None, None).initial
    formats = {
        data_format_of(f.file_major_version, f.file_minor_version) for m in op.fragments for f in m.files
    }
    if len(formats) > 1:
        raise UnsupportedFormatError(f"the fragments mix data formats {sorted(formats)}")
    requested = formats.pop() if formats else None
    manifest = base.manifest if base is not None else None
    plan = plan_write(manifest, "overwrite", new_schema, storage.uri, requested)
    registered = {b.id: b for b in initial} if base is None else base.bases
    frags = _check_new(storage, plan.fields, plan.data_format, op.fragments, registered)
    pending = plan.pending(frags, ())
    if initial and isinstance(pending.operation, OverwriteOp):
        pending = replace(pending, operation=replace(pending.operation, initial_bases=initial))
    if base is None and new_dataset.stable_row_ids and isinstance(pending.operation, OverwriteOp):
        pending = replace(pending, operation=replace(pending.operation, stable_row_ids=True))
    scheme = base.scheme if base is not None else new_dataset.scheme
    if new_dataset.detached and manifest is not None:
        detached = commit_detached(
            storage,
            manifest,
            pending,
            options=options,
            properties=properties,
            message=message,
            txn_uuid=txn_uuid,
        )
        return Snapshot(storage, detached, scheme, options)
    new = commit(
        storage,
        manifest,
        pending,
        options=options,
        properties=properties,
        message=message,
        scheme=scheme,
        txn_uuid=txn_uuid,
    )
    return Snapshot(storage, new, scheme, options)


def _new_fragments(base: Snapshot, metas: Sequence[FragmentMetadata]) -> tuple[Fragment, ...]:
    data_format = writable_data_format(base.manifest, base.uri)
    return _check_new(base.storage, base.manifest.fields, data_format, metas, base.bases)


def _check_new(
    storage: Storage,
    fields: Sequence[LanceField],
    data_format: str,
    metas: Sequence[FragmentMetadata],
    bases: Mapping[int, BasePath] | None = None,
) -> tuple[Fragment, ...]:
    """The format fragments of newly written fragment metadata, once each is checked.

    Raises:
        ValueError: a fragment has a deletion file (its path depends on the id the commit gives).
        UnsupportedFormatError, SchemaError, DataFileNotFoundError, CorruptFileError: see
            :func:`check_fragments`.
    """
    frags = tuple(m.to_fragment() for m in metas)
    for f in frags:
        if f.deletion_file is not None or f.row_id_meta:
            raise ValueError(
                "new fragments cannot carry deletion files or row ids (they are given new ids on "
                "commit): commit deletions with LanceOperation.Delete"
            )
    check_fragments(storage, fields, data_format, frags, bases)
    return frags


def _delete(base: Snapshot, op: LanceOperation.Delete) -> Pending:
    """A Delete of fragments of ``base``. As in pylance, the rows it removes are not known to the
    commit: it is not rebased over a concurrent delete or update of its fragments (that is a
    retryable conflict), unlike a delete made by :meth:`Dataset.delete`.

    Raises:
        ValueError: a fragment is not in ``base`` or its data files differ from it there.
        DataFileNotFoundError, CorruptFileError: a new deletion file is missing or damaged.
    """
    current = {f.id: f for f in base.manifest.fragments}
    updated = tuple(m.to_fragment() for m in op.updated_fragments)
    missing = sorted(({f.id for f in updated} | set(op.deleted_fragment_ids)) - set(current))
    if missing:
        raise ValueError(f"fragments {missing} are not in version {base.version} of {base.uri}")
    for frag in updated:
        old = current[frag.id]
        if frag.files != old.files or frag.physical_rows != old.physical_rows:
            raise ValueError(f"fragment {frag.id} has other data files than in version {base.version}")
        if frag.deletion_file is None:
            raise ValueError(f"updated fragment {frag.id} has no deletion file")
        read_deletions(base.storage, frag, version=base.version, bases=base.bases)  # it exists and reads
    # A fragment keeps its row ids (metadata built by hand may not carry them).
    updated = tuple(
        f if f.row_id_meta else replace(f, row_id_meta=current[f.id].row_id_meta) for f in updated
    )
    return Pending(Delete(updated, tuple(op.deleted_fragment_ids), op.predicate), base.version)


def _rewrite(base: Snapshot, op: LanceOperation.Rewrite) -> Pending:
    """Raises: UnsupportedOperationError (rewritten indices); ValueError (old fragments not in
    ``base``); as :func:`check_fragments` for the new ones."""
    if op.rewritten_indices:
        raise UnsupportedOperationError("Rewrite with rewritten_indices is not supported (no indices)")
    current: Mapping[int, Fragment] = {f.id: f for f in base.manifest.fragments}
    groups = []
    for group in op.groups:
        missing = sorted(m.id for m in group.old_fragments if m.id not in current)
        if missing:
            raise ValueError(f"fragments {missing} are not in version {base.version} of {base.uri}")
        new = tuple(m.to_fragment() for m in group.new_fragments)
        check_fragments(
            base.storage, base.manifest.fields, writable_data_format(base.manifest, base.uri), new, base.bases
        )
        old = [current[m.id] for m in group.old_fragments]
        if uses_stable_row_ids(base.manifest) and not all(
            RowMeta(f.row_id_meta, base.uri).ids is not None for f in new
        ):
            new = _carry_row_ids(base, old, new)
        groups.append(RewriteGroup(tuple(old), new))
    return Pending(Rewrite(tuple(groups)), base.version)


def _carry_row_ids(base: Snapshot, old: list[Fragment], new: tuple[Fragment, ...]) -> tuple[Fragment, ...]:
    """New fragments of a Rewrite on a dataset with stable row ids, given the ids (and versions) of
    the live rows of the old ones, in order, as compaction rewrites them.

    Raises:
        ValueError: the new fragments hold another number of rows than the old ones' live rows.
    """
    live = []
    for frag in old:
        deleted = read_deletions(base.storage, frag, version=base.version)
        live.append((frag, np.setdiff1d(np.arange(frag.physical_rows), deleted)))
    if sum(p.size for _, p in live) != sum(f.physical_rows for f in new):
        raise ValueError(
            "the new fragments of a Rewrite on a dataset with stable row ids must hold the live rows of "
            "the old ones, in order (or carry their row ids)"
        )
    return tuple(carried_row_ids(live, list(new)))
