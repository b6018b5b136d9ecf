"""Transactions: what a commit did, stored inline in the manifest and as ``_transactions/*.txn``."""

from __future__ import annotations

import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_table._proto import transaction_pb2
from lance_table.errors import CorruptFileError
from lance_table.format import operations as ops
from lance_table.format.bases import BasePath
from lance_table.format.manifest import Fragment, check_fragments, check_schema
from lance_table.format.operations import DataReplacement, Merge, Project, Update, UpdateConfig
from lance_table.schema import LanceField, fields_from_pb, fields_to_pb

COMMIT_MESSAGE_KEY = "__lance_commit_message"


@dataclass(frozen=True)
class Append:
    fragments: tuple[Fragment, ...]
    # Legacy datasets: the dictionary values the new files' keys index, by field id (not stored in
    # the transaction; the new manifest records them). Each extends the dataset's values.
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict, compare=False)
    name = "append"


@dataclass(frozen=True)
class Delete:
    updated_fragments: tuple[Fragment, ...]
    deleted_fragment_ids: tuple[int, ...]
    predicate: str
    name = "delete"


@dataclass(frozen=True)
class Overwrite:
    fragments: tuple[Fragment, ...]
    schema: tuple[LanceField, ...]
    schema_metadata: Mapping[str, bytes] = field(default_factory=dict)
    config_upsert_values: Mapping[str, str] = field(default_factory=dict)
    # The data file format of the new version (not stored in the transaction; None: keep the
    # dataset's, or the default for a new dataset).
    data_format: str | None = field(default=None, compare=False)
    # Legacy datasets: the dictionary values of the new files, by field id (not stored in the
    # transaction; the new manifest records them).
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict, compare=False)
    # A new dataset that uses stable row ids (not stored in the transaction; the manifest's
    # feature flags record it).
    stable_row_ids: bool = field(default=False, compare=False)
    # Base paths a new dataset registers (pylance's ``initial_bases``), ids assigned.
    initial_bases: tuple[BasePath, ...] = ()
    name = "overwrite"


@dataclass(frozen=True)
class RewriteGroup:
    old_fragments: tuple[Fragment, ...]
    new_fragments: tuple[Fragment, ...]


@dataclass(frozen=True)
class Rewrite:
    groups: tuple[RewriteGroup, ...]
    # Not stored in the transaction (as in pylance): the fragment reuse index this compaction
    # records (a serialized IndexMetadata) for the next version's index section.
    frag_reuse_index: bytes | None = field(default=None, compare=False)
    # The uuid of the fragment reuse index it extends (b"" for none): one that changed meanwhile
    # (a concurrent compaction recorded its own moves) makes this commit conflict.
    frag_reuse_extends: bytes = field(default=b"", compare=False)
    name = "rewrite"


@dataclass(frozen=True)
class ReserveFragments:
    num_fragments: int
    name = "reserve_fragments"


@dataclass(frozen=True)
class Restore:
    version: int
    name = "restore"


@dataclass(frozen=True)
class UpdateBases:
    """Register more base paths (pylance's ``add_bases``); ids 0 get the next free ids on commit."""

    new_bases: tuple[BasePath, ...]
    name = "update_bases"


@dataclass(frozen=True)
class Clone:
    """The first version of a clone: the dataset at ``ref_path`` (version ``ref_version``, tag
    ``ref_name``), its files referenced in place when ``is_shallow``."""

    is_shallow: bool
    ref_name: str | None
    ref_version: int
    ref_path: str
    branch_name: str | None = None
    name = "clone"


@dataclass(frozen=True)
class OtherOperation:
    """An operation lance_table reads but does not model (Merge, Project, Update, CreateIndex, ...)."""

    name: str
    fragment_ids: frozenset[int] = frozenset()


Operation = (
    Append
    | Delete
    | Overwrite
    | Rewrite
    | ReserveFragments
    | Restore
    | Merge
    | Update
    | Project
    | UpdateConfig
    | DataReplacement
    | UpdateBases
    | Clone
    | OtherOperation
)


@dataclass(frozen=True)
class Transaction:
    read_version: int
    operation: Operation
    uuid: str = field(default_factory=lambda: str(uuid_mod.uuid4()))
    tag: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def commit_message(self) -> str | None:
        return self.properties.get(COMMIT_MESSAGE_KEY)

    def to_bytes(self) -> bytes:
        pb = transaction_pb2.Transaction()
        pb.read_version = self.read_version
        pb.uuid = self.uuid
        pb.tag = self.tag
        for k, v in self.properties.items():
            pb.transaction_properties[k] = v
        _operation_to_pb(self.operation, pb)
        return pb.SerializeToString()

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> Transaction:
        """Decode a serialized transaction.

        Raises:
            CorruptFileError: the bytes are not a Transaction protobuf.
        """
        pb = _parse(data, path)
        _check_operation(pb, path)
        return cls(
            read_version=pb.read_version,
            operation=_operation_from_pb(pb),
            uuid=pb.uuid,
            tag=pb.tag,
            properties=dict(pb.transaction_properties),
        )


def checked_pb(data: bytes, path: str) -> Any:
    """The Transaction protobuf of ``data``, checked as :meth:`Transaction.from_bytes` checks it,
    its fragments and schema left as protobufs (for a caller that reads a few fields of the
    transactions of a long history).

    Raises:
        CorruptFileError: the bytes are not a Transaction protobuf, or a path or count in it
            cannot be trusted.
        UnsupportedFormatError: the schema uses a logical type lance_table does not know.
    """
    pb = _parse(data, path)
    _check_operation(pb, path)
    return pb


def transaction_summary(data: bytes, path: str) -> tuple[str, dict[str, str]]:
    """The operation's name and the properties of a serialized transaction (what a version's
    history shows of it), without turning its fragments and schema into objects.

    Raises:
        CorruptFileError: the bytes are not a Transaction protobuf.
    """
    pb = _parse(data, path)
    return pb.WhichOneof("operation") or "unknown", dict(pb.transaction_properties)


def _parse(data: bytes, path: str) -> Any:
    """The Transaction protobuf of ``data`` (``path`` names the file in the error)."""
    pb = transaction_pb2.Transaction()
    try:
        pb.ParseFromString(data)
    except (DecodeError, RuntimeError) as exc:
        raise CorruptFileError(path, f"transaction protobuf does not parse ({exc})") from exc
    return pb


def _check_operation(pb: Any, path: str) -> None:
    """Refuse fragments and schemas of the operations lance_table models that cannot be trusted.

    Raises:
        CorruptFileError: a data file path leaves the dataset, a row count is impossible, ...
        UnsupportedFormatError: the schema uses a logical type lance_table does not know.
    """
    kind = pb.WhichOneof("operation")
    if kind == "append":
        check_fragments(pb.append.fragments, path)
    elif kind == "delete":
        check_fragments(pb.delete.updated_fragments, path)
    elif kind == "overwrite":
        check_fragments(pb.overwrite.fragments, path)
        check_schema(pb.overwrite.schema, path)
    elif kind == "merge":
        check_fragments(pb.merge.fragments, path)
        check_schema(pb.merge.schema, path)
    elif kind == "project":
        check_schema(pb.project.schema, path)
    elif kind == "update":
        check_fragments(pb.update.updated_fragments, path)
        check_fragments(pb.update.new_fragments, path)
    elif kind == "rewrite":
        r = pb.rewrite
        for group in (*r.groups, r):
            check_fragments(group.old_fragments, path)
            check_fragments(group.new_fragments, path)


def _frags(pbs: Any) -> tuple[Fragment, ...]:
    return tuple(Fragment.from_pb(p) for p in pbs)


def _put_frags(frags: tuple[Fragment, ...], target: Any) -> None:
    for f in frags:
        f.to_pb(target.add())


def _operation_to_pb(op: Operation, pb: Any) -> None:
    if isinstance(op, Append):
        pb.append.SetInParent()
        _put_frags(op.fragments, pb.append.fragments)
    elif isinstance(op, Delete):
        pb.delete.SetInParent()
        _put_frags(op.updated_fragments, pb.delete.updated_fragments)
        pb.delete.deleted_fragment_ids.extend(op.deleted_fragment_ids)
        pb.delete.predicate = op.predicate
    elif isinstance(op, Overwrite):
        pb.overwrite.SetInParent()
        _put_frags(op.fragments, pb.overwrite.fragments)
        fields_to_pb(op.schema, pb.overwrite.schema)
        for k, v in op.schema_metadata.items():
            pb.overwrite.schema_metadata[k] = v
        for k, s in op.config_upsert_values.items():
            pb.overwrite.config_upsert_values[k] = s
        for base in op.initial_bases:
            base.to_pb(pb.overwrite.initial_bases.add())
    elif isinstance(op, Rewrite):
        pb.rewrite.SetInParent()
        for g in op.groups:
            group = pb.rewrite.groups.add()
            _put_frags(g.old_fragments, group.old_fragments)
            _put_frags(g.new_fragments, group.new_fragments)
    elif isinstance(op, UpdateBases):
        pb.update_bases.SetInParent()
        for base in op.new_bases:
            base.to_pb(pb.update_bases.new_bases.add())
    elif isinstance(op, Clone):
        c = pb.clone
        c.is_shallow, c.ref_version, c.ref_path = op.is_shallow, op.ref_version, op.ref_path
        if op.ref_name is not None:
            c.ref_name = op.ref_name
        if op.branch_name is not None:
            c.branch_name = op.branch_name
    elif isinstance(op, ReserveFragments):
        pb.reserve_fragments.num_fragments = op.num_fragments
    elif isinstance(op, Restore):
        pb.restore.version = op.version
    elif not ops.to_pb(op, pb):
        raise ValueError(f"lance_table cannot write a {op.name!r} transaction")


def _operation_from_pb(pb: Any) -> Operation:
    kind = pb.WhichOneof("operation")
    if kind == "append":
        return Append(_frags(pb.append.fragments))
    if kind == "delete":
        d = pb.delete
        return Delete(_frags(d.updated_fragments), tuple(d.deleted_fragment_ids), d.predicate)
    if kind == "overwrite":
        o = pb.overwrite
        return Overwrite(
            _frags(o.fragments),
            tuple(fields_from_pb(o.schema)),
            dict(o.schema_metadata),
            dict(o.config_upsert_values),
            initial_bases=tuple(BasePath.from_pb(b) for b in o.initial_bases),
        )
    if kind == "rewrite":
        groups = [RewriteGroup(_frags(g.old_fragments), _frags(g.new_fragments)) for g in pb.rewrite.groups]
        if pb.rewrite.old_fragments or pb.rewrite.new_fragments:
            groups.append(RewriteGroup(_frags(pb.rewrite.old_fragments), _frags(pb.rewrite.new_fragments)))
        return Rewrite(tuple(groups))
    if kind == "update_bases":
        return UpdateBases(tuple(BasePath.from_pb(b) for b in pb.update_bases.new_bases))
    if kind == "clone":
        c = pb.clone
        return Clone(
            c.is_shallow,
            c.ref_name if c.HasField("ref_name") else None,
            c.ref_version,
            c.ref_path,
            c.branch_name if c.HasField("branch_name") else None,
        )
    if kind == "reserve_fragments":
        return ReserveFragments(pb.reserve_fragments.num_fragments)
    if kind == "restore":
        return Restore(pb.restore.version)
    modelled = ops.from_pb(pb, kind)
    if modelled is not None:
        return modelled  # type: ignore[no-any-return,unused-ignore]
    return OtherOperation(kind or "unknown", frozenset(_touched_fragment_ids(pb, kind)))


def _touched_fragment_ids(pb: Any, kind: str | None) -> set[int]:
    """Fragment ids an unmodelled operation changes (used by conflict detection)."""
    if kind is None:
        return set()
    op = getattr(pb, kind)
    ids: set[int] = set()
    for name in ("fragments", "updated_fragments", "removed_fragment_ids"):
        if hasattr(op, name):
            for item in getattr(op, name):
                ids.add(item if isinstance(item, int) else item.id)
    return ids
