"""A manifest's fragments as read: checked in bulk when the manifest is decoded, converted to
:class:`~lance_table.format.fragment.Fragment` objects only when first asked for.

Opening the latest version of a long history (and counting its rows, tagging or restoring a
version) needs facts about all its fragments -- their data formats, ids, row counts, whether any
has deletions or row ids -- but not the fragments themselves. Converting thousands of
``DataFragment`` protobufs into Python objects one by one costs microseconds each; instead the
manifest is parsed with its fragments as bytes (:func:`raw_manifest`), and those bytes are parsed
once more, all joined, into messages of columns (:class:`FragmentSource`): parsing a message
repeated merges it, so the ``id`` of every fragment lands in one repeated field, and so on. The
checks :func:`~lance_table.format.fragment.check_fragments` makes are made on those columns.
(A scalar that is 0 is not written: a column then holds fewer values than there are fragments or
files, which :func:`read_fragments` allows only where nothing is lost.)

Only the common shape takes this way: every data file with a plain path and the one format the
manifest records, no deletion file deleting more rows than the smallest fragment holds. Any other
manifest is converted fragment by fragment as before (:func:`read_fragments` returns None), which
also gives the same error, naming the same fragment, for a manifest that is damaged.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from lance_table._proto import table_pb2
from lance_table.format import fragment_facts
from lance_table.format.fragment import MAX_FRAGMENT_ROWS, Fragment, checked_raw_fragments, data_format_of
from lance_table.format.paths import MAX_NAME_BYTES

#: the proto file of the messages below (made at first use, from table.proto's descriptor)
_PROTO_NAME = "lance_table/fragment_columns.proto"
_CLASSES: dict[str, Any] = {}
_LOCK = threading.Lock()

# The characters of a plain file name (``paths._PLAIN_PATH`` without ``/``), and a translation
# that makes every other character NUL.
_NAME_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-."
_NOT_NAME_CHARS = bytes(c if c in _NAME_CHARS else 0 for c in range(256))


def _message(name: str) -> Any:
    """A new message of one of the classes made from table.proto (see :func:`_make_classes`)."""
    if not _CLASSES:
        with _LOCK:
            if not _CLASSES:
                _CLASSES.update(_make_classes())
    return _CLASSES[name]()


def raw_manifest() -> Any:
    """An empty ``Manifest`` whose ``fragments`` and ``fields`` are bytes (each a serialized
    ``DataFragment`` or ``lance.file.Field``): a parse into it leaves the fragments and the schema
    unparsed, every other field as table.proto's ``Manifest`` has it."""
    return _message("RawManifest")


def _make_classes() -> dict[str, Any]:
    """``RawManifest`` (table.proto's ``Manifest`` with ``fragments`` and ``fields`` as bytes),
    ``FragmentColumns`` (every field of ``DataFragment`` repeated, its data files and deletion file
    as bytes), ``FileColumns`` (the path, as bytes, and format of a ``DataFile``, repeated),
    ``DeletionColumns`` (every field of ``DeletionFile`` repeated), ``FragmentEntries`` (only
    ``fragments``, as bytes: its serialization is a manifest's fragment records) and
    ``FragmentRows`` (those records with only their rows and deletion file parsed). Numbers and types
    are copied from table.proto's descriptor, so the two cannot disagree."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    source = descriptor_pb2.FileDescriptorProto()
    table_pb2.DESCRIPTOR.CopyToProto(source)
    by_name = {m.name: m for m in source.message_type}
    out = descriptor_pb2.FileDescriptorProto(
        name=_PROTO_NAME,
        package=f"{source.package}.lance_table_columns",
        syntax="proto3",
        dependency=[source.name, *source.dependency],
    )
    field_type = descriptor_pb2.FieldDescriptorProto
    raw = out.message_type.add(name="RawManifest")
    raw.CopyFrom(by_name["Manifest"])
    raw.name = "RawManifest"
    inner = f".{source.package}.Manifest."
    for f in raw.field:
        if f.type_name.startswith(inner):  # a map's entry type: this message's own copy
            f.type_name = f".{out.package}.RawManifest." + f.type_name[len(inner) :]
        if f.name in ("fragments", "fields"):
            f.type = field_type.TYPE_BYTES
            f.ClearField("type_name")
    entries = out.message_type.add(name="FragmentEntries")
    entries.field.add().CopyFrom(next(f for f in raw.field if f.name == "fragments"))
    for name, columns, as_bytes, only in (
        ("DataFragment", "FragmentColumns", ("files", "deletion_file"), None),
        # (a path is checked as ASCII by read_fragments; the other fields of a data file are
        # facts of the fragment objects, parsed as they are made)
        ("DataFile", "FileColumns", ("path",), ("path", "file_major_version", "file_minor_version")),
        ("DeletionFile", "DeletionColumns", (), None),
    ):
        message = out.message_type.add(name=columns)
        for f in by_name[name].field:
            if only is not None and f.name not in only:
                continue
            copied = message.field.add()
            copied.CopyFrom(f)
            copied.ClearField("oneof_index")
            copied.ClearField("proto3_optional")
            copied.label = field_type.LABEL_REPEATED
            if f.name in as_bytes:
                copied.type = field_type.TYPE_BYTES
                copied.ClearField("type_name")
    # a fragment's rows and deletion file alone, one per fragment record (``FragmentRows``)
    rows = out.message_type.add(name="FragmentRowsView")
    for f in by_name["DataFragment"].field:
        if f.name in ("physical_rows", "deletion_file"):
            rows.field.add().CopyFrom(f)
    ids = out.message_type.add(name="FragmentIdView")  # a fragment's id alone
    ids.field.add().CopyFrom(next(f for f in by_name["DataFragment"].field if f.name == "id"))
    id_columns = out.message_type.add(name="FragmentIdColumns")  # every fragment's id, repeated
    id_columns.field.add().CopyFrom(ids.field[0])
    id_columns.field[0].label = field_type.LABEL_REPEATED
    views = out.message_type.add(name="FragmentRows")
    views.field.add().CopyFrom(entries.field[0])
    views.field[0].type = field_type.TYPE_MESSAGE
    views.field[0].type_name = f".{out.package}.FragmentRowsView"
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(out.name)
    except KeyError:
        pool.Add(out)
    return {
        m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{out.package}.{m.name}"))
        for m in out.message_type
    }


class FragmentSource:
    """The fragments of a manifest as serialized ``DataFragment`` protobufs, checked; converted
    into :class:`Fragment` objects (once, then kept) by :meth:`fragments`.

    Attributes:
        raws: each fragment's protobuf bytes, in the manifest's order.
        where: the manifest they come from (for messages).
        facts: what :func:`lance_table.format.fragment_facts.facts` tells of them.
        num_rows: their rows that are not deleted.
    """

    __slots__ = ("_converted", "_entries", "_ids", "_live_rows", "facts", "num_rows", "raws", "where")

    def __init__(
        self,
        raws: list[bytes],
        where: str,
        facts: fragment_facts.FragmentFacts,
        num_rows: int,
        live_rows: list[int] | None = None,
    ):
        self.raws = raws
        self.where = where
        self.facts = facts
        self.num_rows = num_rows
        self._live_rows = live_rows
        self._converted: tuple[Fragment, ...] | None = None
        self._entries: bytes | None = None
        self._ids: np.ndarray | None = None

    @property
    def live_rows(self) -> list[int]:
        """Each fragment's rows that are not deleted, in order, without converting the fragments
        (a fragment with a deletion file: its rows less the count the deletion file records,
        which :func:`read_fragments` checked is written for each)."""
        live = self._live_rows
        if live is None:
            views = _message("FragmentRows")
            views.ParseFromString(self.entries())
            live = [v.physical_rows - v.deletion_file.num_deleted_rows for v in views.fragments]
            self._live_rows = live
        return live

    def __len__(self) -> int:
        return len(self.raws)

    def fragments(self) -> tuple[Fragment, ...]:
        """The fragments as objects (converted at the first call; later calls return the same
        tuple, whose facts are known to :mod:`~lance_table.format.fragment_facts`).

        Raises:
            CorruptFileError: a fragment's protobuf does not parse (naming :attr:`where`).
        """
        out = self._converted
        if out is None:
            out = checked_raw_fragments(self.raws, self.where)
            fragment_facts.keep(out, self.facts)
            self._converted = out
        return out

    @property
    def unconverted(self) -> bool:
        """Whether the fragments are not converted into objects yet."""
        return self._converted is None

    def fragment(self, index: int) -> Fragment:
        """Fragment ``index`` as an object, converting only it when the others are not yet.

        Raises:
            CorruptFileError: its protobuf does not parse (naming :attr:`where`).
        """
        out = self._converted
        if out is not None:
            return out[index]
        return checked_raw_fragments([self.raws[index]], self.where)[0]

    def entries(self) -> bytes:
        """The fragments as the records of a manifest's ``fragments`` field, back to back (made
        once, then kept)."""
        out = self._entries
        if out is None:
            message = _message("FragmentEntries")
            message.fragments.extend(self.raws)
            out = self._entries = bytes(message.SerializeToString())
        return out

    def extended(self, more: Sequence[Fragment]) -> FragmentSource | None:
        """These fragments followed by ``more`` (new fragments with their final ids), without
        converting these: their bytes, records and facts are reused and only ``more``'s are made,
        so an append's next manifest costs what its new fragments do. (These were checked when
        read, in bulk; ``more`` are objects, checked as made.) None when the facts of the whole
        cannot be told without these fragments' ids.
        """
        facts = fragment_facts.extended(self.facts, more)
        if facts is None:
            return None
        more = tuple(more)
        live = self._live_rows
        out = FragmentSource(
            [*self.raws, *(f.pb_bytes for f in more)],
            self.where,
            facts,
            self.num_rows + sum(f.num_rows for f in more),
            None if live is None else [*live, *(f.num_rows for f in more)],
        )
        entries = self._entries
        if entries is not None:
            out._entries = entries + b"".join([f.manifest_entry for f in more])
        converted = self._converted
        if converted is not None:
            out._converted = converted + more
            fragment_facts.keep(out._converted, facts)
        return out

    def positions(self, ids: Sequence[int]) -> list[int] | None:
        """Where the fragments of ``ids`` are (their indexes in :attr:`raws`), found without
        converting the fragments: the ids in order are read in bulk (once, then kept) and each
        fragment found is parsed to confirm its id. None when an id is not held exactly once,
        or the order of the ids cannot be told (the caller then takes the fragments as objects).
        """
        order = self._ids
        if order is None:
            order = self._ids = _ordered_ids(self.raws)
        if not len(order) or not ids:
            return None
        wanted = np.asarray(ids, dtype=np.int64)
        by_id = np.argsort(order, kind="stable")
        sorted_ids = order[by_id]
        at = np.searchsorted(sorted_ids, wanted)
        if at.max() >= len(order) or not np.array_equal(sorted_ids[at], wanted):
            return None  # an id not held (the caller's conflict)
        after = np.minimum(at + 1, len(order) - 1)
        if np.any((after != at) & (sorted_ids[after] == wanted)):
            return None  # an id held twice
        found = by_id[at].tolist()
        ids_view = _message("FragmentIdView")
        for index, expected in zip(found, wanted.tolist(), strict=True):
            ids_view.ParseFromString(self.raws[index])
            if ids_view.id != expected:
                return None
        return found

    def ids_ascend(self) -> bool:
        """Whether the fragments' ids ascend in their order (False when that cannot be told)."""
        order = self._ids
        if order is None:
            order = self._ids = _ordered_ids(self.raws)
        return len(order) == len(self.raws) and bool(np.all(order[1:] > order[:-1]))

    def edited(self, changes: Mapping[int, Sequence[Fragment]]) -> FragmentSource | None:
        """These fragments with the one at each index of ``changes`` replaced by the fragments it
        maps to (none: removed), the others kept as the bytes they are. The Python work is that
        of the changed fragments; the rest is checked again in bulk (:func:`read_fragments`),
        in C, for the facts of the whole. None when the result is not of the common shape (or
        holds no fragment): the caller then builds it from the fragments as objects, with the
        same bytes.
        """
        raws = self.raws
        out: list[bytes] = []
        start = 0
        for index in sorted(changes):
            out += raws[start:index]
            out += [f.pb_bytes for f in changes[index]]
            start = index + 1
        out += raws[start:]
        if not out:
            return None
        return read_fragments(out, None, self.where)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FragmentSource, (self.raws, self.where, self.facts, self.num_rows, self._live_rows))


def read_fragments(raws: list[bytes], expected: str | None, where: str) -> FragmentSource | None:
    """The fragments ``raws`` (serialized ``DataFragment`` protobufs of the manifest ``where``,
    whose data files must all be of format ``expected``; None: any one format) checked in bulk, or
    None when they are not all of the common shape -- with plain data file paths, of one recorded
    format that is ``expected``, deleting no more rows than the smallest fragment holds -- or do
    not parse: the caller then
    converts them one by one (:func:`~lance_table.format.fragment.checked_fragments`), which
    checks them and gives the error of a damaged one.
    """
    n = len(raws)
    columns = _message("FragmentColumns")
    files = _message("FileColumns")
    deletions = _message("DeletionColumns")
    try:
        columns.ParseFromString(b"".join(raws))
        nfiles = len(columns.files)
        files.ParseFromString(b"".join(columns.files))
        ndeletions = len(columns.deletion_file)
        if ndeletions:
            deletions.ParseFromString(b"".join(columns.deletion_file))
    except (DecodeError, RuntimeError):  # the one-by-one conversion names the damage
        return None
    rows = columns.physical_rows[:]
    paths = files.path[:]
    if len(rows) != n or (rows and max(rows) > MAX_FRAGMENT_ROWS) or len(paths) != nfiles:
        return None
    deleted = 0
    if ndeletions:
        # each deletion file deletes between 1 and its fragment's rows: here, when every count is
        # written (none is 0) and none is above the fewest rows of a fragment
        counts = deletions.num_deleted_rows[:]
        if (
            len(counts) != ndeletions
            or max(counts) > min(rows)
            or not {0, 1}.issuperset(deletions.file_type[:])
        ):
            return None
        deleted = sum(counts)
    formats: frozenset[str] = frozenset()
    if nfiles:
        major = _one_value(files.file_major_version[:], nfiles)
        minor = _one_value(files.file_minor_version[:], nfiles)
        if major is None or minor is None:
            return None
        found = data_format_of(major, minor)
        if expected is not None and found != expected:
            return None
        formats = frozenset((found,))
        if not _plain(paths):
            return None
    ids = columns.id[:]
    if len(ids) == n - 1:  # one fragment's id is 0, which is not written
        ids.append(0)
    elif len(ids) != n:
        return None
    unique = frozenset(ids)
    row_ids = any(
        len(getattr(columns, name))
        for name in (
            "inline_row_ids",
            "external_row_ids",
            "inline_last_updated_at_versions",
            "external_last_updated_at_versions",
            "inline_created_at_versions",
            "external_created_at_versions",
        )
    )
    facts = fragment_facts.FragmentFacts(
        formats, ndeletions > 0, row_ids, unique, len(unique) != n, max(ids, default=-1)
    )
    return FragmentSource(raws, where, facts, sum(rows) - deleted, None if ndeletions else rows)


#: the first byte of a serialized ``DataFragment`` whose id (field 1, a varint) is written first
_ID_TAG = 0x08


def _ordered_ids(raws: list[bytes]) -> np.ndarray:
    """The ids of the fragments ``raws``, in order, read in bulk; empty when that order cannot be
    told. The ids parsed from the records all joined are in the records' order; writers write the
    fields in the order of their numbers, so a record with an id starts with it, and every id but
    0 is written. When every record starts with its id and there are as many ids as records, each
    holds one; when one record does not and there is one id fewer, that record's id is 0."""
    n = len(raws)
    columns = _message("FragmentIdColumns")
    joined = b"".join(raws)
    try:
        columns.ParseFromString(joined)
    except (DecodeError, RuntimeError):
        return np.zeros(0, np.int64)
    ids = np.asarray(columns.id[:], dtype=np.int64)
    lengths = np.fromiter(map(len, raws), np.int64, n)
    if not n or not lengths.all():
        return np.zeros(0, np.int64)
    starts = np.cumsum(lengths) - lengths
    missing = np.flatnonzero(np.frombuffer(joined, np.uint8)[starts] != _ID_TAG)
    if len(ids) == n and not len(missing):
        return ids
    if len(ids) == n - 1 and len(missing) == 1:
        return np.insert(ids, missing[0], 0)
    return np.zeros(0, np.int64)


def _one_value(values: list[int], count: int) -> int | None:
    """The one value ``count`` scalars take, given those of them written (a 0 is not): None when
    they differ."""
    if not values:
        return 0
    if len(values) != count:
        return None
    first = values[0]
    return first if values.count(first) == count else None


def _plain(paths: list[bytes]) -> bool:
    """Whether every path (UTF-8) is a plain file name, which ``paths.check_relative_path``
    accepts: letters, digits, ``_``, ``-`` and ``.``, not starting with a dot, at most
    :data:`MAX_NAME_BYTES` long. (Nested paths and names starting with ``-`` are plain too, but
    no writer makes them: they take the slower way.)"""
    if max(map(len, paths)) > MAX_NAME_BYTES:
        return False
    first = min(paths)  # the least first character: none is empty or starts with "." or "-"
    if not first or first[0] in b"-.":
        return False
    return b"\0" not in b"".join(paths).translate(_NOT_NAME_CHARS)
