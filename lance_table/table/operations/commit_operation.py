"""Committing a ``LanceOperation`` built by hand (pylance's ``LanceDataset.commit``): check it against
the version it names, turn it into the format's operation, and send it through the one commit path.

Unlike pylance, which trusts the caller, the fragments are checked before anything is written:
their data files must exist in this dataset with the rows and field types the metadata claims, in
the dataset's data format. A refused commit writes nothing, so the dataset stays as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from lance_table._parallel import METADATA, map_on
from lance_table.errors import (
    DatasetNotFoundError,
    SchemaError,
    UnsupportedFormatError,
    UnsupportedOperationError,
)
from lance_table.file.fields import BLOB_KEY
from lance_table.file.v2_1.blob_v2 import read_node
from lance_table.format import paths
from lance_table.format.manifest import Fragment, data_format_of
from lance_table.format.transaction import Append, Delete, Rewrite, RewriteGroup
from lance_table.schema import FieldNode, LanceField, build_tree
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.commit import CommitOptions, Pending, check_can_commit, check_rebasable, commit
from lance_table.table.deletion import read_deletions
from lance_table.table.fragment import FragmentReader
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.operations.restore import plan_restore
from lance_table.table.operations.write import LEGACY_FORMAT, plan_write, writable_data_format
from lance_table.table.snapshot import Snapshot, load


def commit_operation(
    storage: Storage,
    operation: LanceOperation.BaseOperation | Transaction,
    read_version: int | None,
    options: CommitOptions,
    message: str | None = None,
) -> Snapshot:
    """Commit ``operation`` (planned against ``read_version``); return the version it made.

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
            "Overwrite, Append, Delete, Rewrite and Restore"
        )
    replaces = isinstance(operation, (LanceOperation.Overwrite, LanceOperation.Restore))
    if read_version is None and not replaces:
        raise ValueError("read_version is required for all operations except Overwrite and Restore")
    check_can_commit(options, storage)
    if isinstance(operation, LanceOperation.Overwrite):
        return _overwrite(storage, operation, read_version, options, message, properties, txn_uuid)
    base = load(storage, read_version, options=options)
    versions.check_writable(base.manifest, storage.uri)
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
    else:  # pragma: no cover - every dataclass operation is handled above
        raise UnsupportedOperationError(f"LanceOperation.{type(operation).__name__} is not supported")
    check_rebasable(storage, pending)
    manifest = commit(
        storage,
        base.manifest,
        pending,
        options=options,
        properties=properties,
        message=message,
        scheme=base.scheme,
        txn_uuid=txn_uuid,
    )
    return Snapshot(storage, manifest, base.scheme, options)


def _overwrite(
    storage: Storage,
    op: LanceOperation.Overwrite,
    read_version: int | None,
    options: CommitOptions,
    message: str | None,
    properties: dict[str, str],
    txn_uuid: str | None,
) -> Snapshot:
    if not isinstance(op.new_schema, pa.Schema):
        raise TypeError(f"Overwrite.new_schema must be a pyarrow.Schema, got {type(op.new_schema)}")
    if op.initial_bases:
        raise UnsupportedOperationError(
            "Overwrite with initial_bases (registered base paths) is not supported"
        )
    try:
        base: Snapshot | None = load(storage, read_version, options=options)
    except DatasetNotFoundError:
        base = None
    formats = {
        data_format_of(f.file_major_version, f.file_minor_version) for m in op.fragments for f in m.files
    }
    if len(formats) > 1:
        raise UnsupportedFormatError(f"the fragments mix data formats {sorted(formats)}")
    requested = formats.pop() if formats else None
    manifest = base.manifest if base is not None else None
    plan = plan_write(manifest, "overwrite", op.new_schema, storage.uri, requested)
    frags = _check_new(storage, plan.fields, plan.data_format, op.fragments)
    pending = plan.pending(frags, ())
    scheme = base.scheme if base is not None else versions.naming_scheme([])
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
    return _check_new(base.storage, base.manifest.fields, data_format, metas)


def _check_new(
    storage: Storage, fields: Sequence[LanceField], data_format: str, metas: Sequence[FragmentMetadata]
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
    check_fragments(storage, fields, data_format, frags)
    return frags


def check_fragments(
    storage: Storage, fields: Sequence[LanceField], data_format: str, frags: Sequence[Fragment]
) -> None:
    """Check that fragments' data files are in this dataset, in ``data_format``, with the rows their
    metadata says and the fields of ``fields`` (by id, name and type). Footers are read on threads.

    Raises:
        UnsupportedFormatError: a data file of another format, or in another base path.
        SchemaError: a data file is listed with a field id the schema does not have, or stores a
            field under another name or type.
        DataFileNotFoundError: a data file does not exist in this dataset.
        CorruptFileError: a data file's path is not a plain name, or it holds another number of rows.
    """
    roots = {n.name: read_node(n) for n in build_tree(tuple(fields))}
    by_id = {n.id: n for root in roots.values() for n in root.walk()}
    if data_format == LEGACY_FORMAT and any(pa.types.is_dictionary(n.arrow_type) for n in by_id.values()):
        raise UnsupportedFormatError("fragments of legacy datasets with dictionary columns are not committed")
    for frag in frags:
        for f in frag.files:
            paths.check_relative_path(f.path, "fragment metadata", "data file")
            if f.base_id is not None:
                raise UnsupportedFormatError(f"data file {f.path} is in base path {f.base_id}, not supported")
            if f.version != data_format:
                raise UnsupportedFormatError(
                    f"data file {f.path} is format {f.version}, but the dataset stores format {data_format}"
                )
            unknown = sorted(set(f.fields) - set(by_id))
            if unknown:
                raise SchemaError(
                    f"data file {f.path} stores field ids {unknown}, which the schema does not have"
                )

    def check(frag: Fragment) -> None:
        reader = FragmentReader(frag, storage, roots)
        reader.physical_rows  # noqa: B018 - reads every footer: the files exist and hold these rows
        for f in frag.files:
            stored = reader._reader(f).metadata.roots_by_id
            for node in (n for r in stored.values() for n in r.walk()):
                _check_field(by_id.get(node.id), node, f.path)

    map_on(METADATA, check, frags)


def _check_field(expected: FieldNode | None, stored: FieldNode, path: str) -> None:
    """Raises: SchemaError: the file stores the field under another name or type."""
    if expected is None or BLOB_KEY in stored.field.metadata or BLOB_KEY in expected.field.metadata:
        return  # a 2.1+ file lists only leaves, a 2.0 file may hold more; blobs are checked on read
    if expected.name != stored.name or (
        not expected.children and not _same_type(expected.arrow_type, stored.arrow_type)
    ):
        raise SchemaError(
            f"data file {path} stores field {stored.id} as {stored.name!r} ({stored.arrow_type}), "
            f"but the schema has {expected.name!r} ({expected.arrow_type})"
        )


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_dictionary(a):
        a = a.value_type
    if pa.types.is_dictionary(b):
        b = b.value_type
    return bool(a == b)


def _delete(base: Snapshot, op: LanceOperation.Delete) -> Pending:
    """A Delete of fragments of ``base``, with what each loses, so that it rebases as a delete made
    by :meth:`Dataset.delete` does.

    Raises:
        ValueError: a fragment is not in ``base`` or its data files differ from it there.
        DataFileNotFoundError, CorruptFileError: a new deletion file is missing or damaged.
    """
    current = {f.id: f for f in base.manifest.fragments}
    updated = tuple(m.to_fragment() for m in op.updated_fragments)
    missing = sorted(({f.id for f in updated} | set(op.deleted_fragment_ids)) - set(current))
    if missing:
        raise ValueError(f"fragments {missing} are not in version {base.version} of {base.uri}")
    additions: dict[int, np.ndarray] = {}
    bases = {}
    for frag in updated:
        old = current[frag.id]
        if frag.files != old.files or frag.physical_rows != old.physical_rows:
            raise ValueError(f"fragment {frag.id} has other data files than in version {base.version}")
        if frag.deletion_file is None:
            raise ValueError(f"updated fragment {frag.id} has no deletion file")
        before = read_deletions(base.storage, old, version=base.version)
        after = read_deletions(base.storage, frag, version=base.version)
        additions[frag.id] = np.setdiff1d(after, before).astype(np.uint32)
        bases[frag.id] = old.deletion_file
    for frag_id in op.deleted_fragment_ids:
        additions[frag_id] = np.arange(current[frag_id].physical_rows, dtype=np.uint32)
        bases[frag_id] = current[frag_id].deletion_file
    delete = Delete(updated, tuple(op.deleted_fragment_ids), op.predicate)
    return Pending(delete, base.version, additions, bases)


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
            base.storage, base.manifest.fields, writable_data_format(base.manifest, base.uri), new
        )
        groups.append(RewriteGroup(tuple(current[m.id] for m in group.old_fragments), new))
    return Pending(Rewrite(tuple(groups)), base.version)
