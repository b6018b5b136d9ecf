"""Transactions as pylance's Python layer shows them: ``read_transaction``, ``get_transactions`` and
``commit_batch``.

A stored transaction (the ``lance.table.Transaction`` protobuf) becomes pylance's ``Transaction``
dataclass holding a ``LanceOperation``; kinds lance_table does not model (``CreateIndex``,
``ReserveFragments``, ...) become a bare ``LanceOperation.BaseOperation``, as pylance shows the ones
it has no Python class for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lance_table.errors import BatchCommitError, VersionGoneError, VersionNotFoundError
from lance_table.format import operations as ops
from lance_table.format import transaction as txn_fmt
from lance_table.format.manifest import Fragment
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.fragment_metadata import DataFile, FragmentMetadata
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.lance_schema import LanceSchema
from lance_table.table.snapshot import Snapshot

DEFAULT_RECENT_TRANSACTIONS = 10

_UPDATE_MODE_NAMES = {ops.REWRITE_ROWS: "rewrite_rows", ops.REWRITE_COLUMNS: "rewrite_columns"}


def read_transaction(storage: Storage, version: int) -> Transaction | None:
    """The transaction that made ``version``, or None when it has none (or its file is gone).

    Raises:
        VersionGoneError: there is no such version (a VersionNotFoundError and, as pylance's error,
            an OSError).
        CorruptFileError: the manifest or transaction is damaged.
    """
    try:
        entry = versions.find_entry(storage, version)
        mf = versions.read_manifest_file(storage, entry)
    except (FileNotFoundError, VersionNotFoundError) as exc:
        raise VersionGoneError(f"version {version} of {storage.uri} does not exist") from exc
    stored = versions.read_transaction(storage, mf)
    return None if stored is None else to_python(stored)


def get_transactions(snapshot: Snapshot, recent_transactions: int) -> list[Transaction | None]:
    """The transactions of this version and the ones before it, newest first, at most
    ``recent_transactions`` but at least one, as pylance (None for a version without one or
    cleaned up)."""
    out: list[Transaction | None] = []
    count = max(int(recent_transactions), 1)
    for version in range(snapshot.version, max(snapshot.version - count, 0), -1):
        try:
            out.append(read_transaction(snapshot.storage, version))
        except VersionNotFoundError:
            out.append(None)
    return out


def to_python(stored: txn_fmt.Transaction) -> Transaction:
    """A stored transaction as pylance's ``Transaction``."""
    return Transaction(
        read_version=stored.read_version,
        operation=_operation(stored.operation),
        uuid=stored.uuid,
        transaction_properties=dict(stored.properties),
    )


def _metas(frags: Sequence[Fragment]) -> list[FragmentMetadata]:
    return [FragmentMetadata.from_fragment(f) for f in frags]


def _update_map(m: ops.UpdateMap | None) -> LanceOperation.UpdateMap | None:
    return None if m is None else LanceOperation.UpdateMap(dict(m.updates), m.replace)


def _operation(op: Any) -> LanceOperation.BaseOperation:
    L = LanceOperation
    if isinstance(op, txn_fmt.Append):
        return L.Append(_metas(op.fragments))
    if isinstance(op, txn_fmt.Delete):
        return L.Delete(_metas(op.updated_fragments), list(op.deleted_fragment_ids), op.predicate)
    if isinstance(op, txn_fmt.Overwrite):
        bases = list(op.initial_bases) or None
        return L.Overwrite(LanceSchema(op.schema, op.schema_metadata), _metas(op.fragments), bases)
    if isinstance(op, txn_fmt.Rewrite):
        groups = [L.RewriteGroup(_metas(g.old_fragments), _metas(g.new_fragments)) for g in op.groups]
        return L.Rewrite(groups, [])
    if isinstance(op, txn_fmt.Restore):
        return L.Restore(op.version)
    if isinstance(op, ops.Merge):
        return L.Merge(
            _metas(op.fragments), LanceSchema(op.schema, op.schema_metadata), op.preserves_nullability
        )
    if isinstance(op, ops.Update):
        return L.Update(
            list(op.removed_fragment_ids),
            _metas(op.updated_fragments),
            _metas(op.new_fragments),
            list(op.fields_modified),
            list(op.fields_for_preserving_frag_bitmap),
            _UPDATE_MODE_NAMES.get(op.update_mode, "rewrite_rows"),
        )
    if isinstance(op, ops.Project):
        return L.Project(LanceSchema(op.schema), op.preserves_nullability)
    if isinstance(op, ops.UpdateConfig):
        fields = {k: _update_map(v) for k, v in op.field_metadata_updates.items()}
        return L.UpdateConfig(
            _update_map(op.config_updates),
            _update_map(op.table_metadata_updates),
            _update_map(op.schema_metadata_updates),
            fields or None,  # type: ignore[arg-type]
        )
    if isinstance(op, ops.DataReplacement):
        return L.DataReplacement(
            [
                L.DataReplacementGroup(
                    frag_id,
                    DataFile(
                        d.path,
                        list(d.fields),
                        list(d.column_indices),
                        d.file_major_version,
                        d.file_minor_version,
                        d.file_size_bytes,
                        d.base_id,
                    ),
                )
                for frag_id, d in op.replacements
            ]
        )
    if isinstance(op, txn_fmt.Clone):
        return L.Clone(  # type: ignore[attr-defined]
            is_shallow=op.is_shallow,
            ref_name=op.ref_name,
            ref_version=op.ref_version,
            ref_path=op.ref_path,
            branch_name=op.branch_name,
        )
    return L.BaseOperation()


def merge_appends(transactions: Sequence[Transaction]) -> Transaction:
    """The one transaction ``commit_batch`` commits for ``transactions``: their appends merged
    (pylance merges only appends), planned against the newest read version among them.

    Raises:
        TypeError: not a sequence of Transactions.
        BatchCommitError: no transactions, or one that is not an Append.
    """
    if not transactions:
        raise BatchCommitError("commit_batch needs at least one transaction")
    fragments: list[FragmentMetadata] = []
    properties: dict[str, str] = {}
    for t in transactions:
        if not isinstance(t, Transaction):
            raise TypeError(f"transactions must be Transactions, got {type(t)}")
        if not isinstance(t.operation, LanceOperation.Append):
            raise BatchCommitError(
                "commit_batch merges only Append transactions, got "
                f"LanceOperation.{type(t.operation).__name__}"
            )
        fragments.extend(t.operation.fragments)
        properties.update(t.transaction_properties or {})
    read_version = max(t.read_version for t in transactions)
    return Transaction(read_version, LanceOperation.Append(fragments), transaction_properties=properties)


__all__ = [
    "DEFAULT_RECENT_TRANSACTIONS",
    "get_transactions",
    "merge_appends",
    "read_transaction",
    "to_python",
]
