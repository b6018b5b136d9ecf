"""The manifest file's framing: encoding and decoding a whole manifest file, and the summary of one
that listing versions needs.

A manifest file is ``[dictionary values]?`` ``[u32 len][IndexSection]?`` ``[u32 len][Transaction]``
``[u32 len][Manifest]`` followed by a 16-byte footer ``[u64 manifest_pos][u16 0][u16 2]["LANC"]``. Offsets
point at the u32 lengths. The dictionary values (legacy datasets only) are described in
:mod:`lance_table.format.dictionaries`.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from google.protobuf.message import DecodeError

from lance_table._lru import LRU
from lance_table._proto import table_pb2
from lance_table.errors import CorruptFileError
from lance_table.format.dictionaries import _decode_dictionaries, _encode_dictionaries
from lance_table.format.fragment import FRAGMENT_CACHE_SIZE, LEGACY_DATA_FORMAT, Fragment, checked_fragments
from lance_table.format.fragment_source import FragmentSource, raw_manifest, read_fragments
from lance_table.format.manifest import (
    _MIXED_FILE_VERSIONS,
    Manifest,
    _check_file_versions,
    check_schema,
    named_data_format,
    parse_fields,
    schema_of,
)
from lance_table.format.paths import check_relative_path

MANIFEST_MAGIC = b"LANC"
MANIFEST_FOOTER = struct.Struct("<QHH")
MANIFEST_FOOTER_SIZE = 16
# The manifest footer carries the legacy file version 0.2, whatever the data format.
MANIFEST_FOOTER_VERSION = (0, 2)
# The range of google.protobuf.Timestamp (years 1 to 9999).
_MIN_SECONDS = -62135596800
_MAX_SECONDS = 253402300799


@dataclass(frozen=True)
class ManifestFile:
    """The decoded sections of one manifest file."""

    manifest: Manifest
    transaction: bytes | None  # the inline serialized Transaction, if present
    size: int
    path: str = ""  # where the file was read from, for error messages


def encode_manifest_file(manifest: Manifest, transaction: bytes) -> bytes:
    """The bytes of a manifest file: optional index section, inline transaction, manifest, footer."""
    out = bytearray()
    dictionary_positions = _encode_dictionaries(manifest, out)
    index_offset = None
    if manifest.index_section is not None:
        index_offset = len(out)
        out += struct.pack("<I", len(manifest.index_section)) + manifest.index_section
    txn_offset = len(out)
    out += struct.pack("<I", len(transaction)) + transaction
    # The fragments' entries are joined as they are: a protobuf message may hold its fields in any
    # order, and a repeated field's entries keep theirs (a parser reads the same manifest).
    pb = manifest.to_pb(txn_offset, index_offset, dictionary_positions, with_fragments=False)
    source = manifest.fragment_source  # (if given: the fragments as read, not converted)
    entries = source.entries() if source is not None else fragment_entries(manifest.fragments)
    body = pb.SerializeToString() + entries
    manifest_pos = len(out)
    out += struct.pack("<I", len(body)) + body
    out += MANIFEST_FOOTER.pack(manifest_pos, *MANIFEST_FOOTER_VERSION) + MANIFEST_MAGIC
    return bytes(out)


def fragment_entries(fragments: tuple[Fragment, ...]) -> bytes:
    """The manifest entries of ``fragments`` (:attr:`Fragment.manifest_entry`), back to back.

    The entries of a recently encoded fragment tuple are kept with it: the next version of an
    append holds that very tuple's fragments and a few more, so only the new ones are joined to
    them (the prefix is compared element by element in C, identical objects at once), and the
    cost of a small commit does not grow with the fragments of the table. Equal fragments have
    equal entries (an entry is made from a fragment's fields alone)."""
    hit = _ENTRIES.get(id(fragments))
    if hit is not None and hit[0] is fragments:
        return hit[1]
    joined = None
    for kept, kept_joined in reversed(_ENTRIES.values()):
        n = len(kept)
        if n and n <= len(fragments) and fragments[:n] == kept:
            joined = kept_joined + b"".join([f.manifest_entry for f in fragments[n:]])
            break
    if joined is None:
        joined = b"".join([f.manifest_entry for f in fragments])
    _ENTRIES.put(id(fragments), (fragments, joined))  # (the tuple is kept: its id stays its own)
    return joined


#: fragment tuples recently encoded and their joined entries, by the tuple's id (the latest
#: versions of the datasets being written; a 5,000-fragment table's entries take about 1 MB)
_ENTRIES: LRU[int, tuple[tuple[Fragment, ...], bytes]] = LRU(4)


def decode_manifest_file(data: bytes, path: str) -> ManifestFile:
    """Parse a manifest file.

    The fragments are checked in bulk and left unconverted (see
    :mod:`~lance_table.format.fragment_source`) when they are of the common shape; otherwise, as
    every fragment of a damaged manifest, they are checked and converted one by one.

    Raises:
        CorruptFileError: the framing or the protobuf is damaged.
    """
    pb, pos, txn = _parse(data, path, message=raw_manifest())
    source = None
    if pb.HasField("data_format"):  # (else inferred from the first data file, by the conversion)
        source = read_fragments(pb.fragments[:], _expected_format(pb), path)
    if source is None:
        pb, pos, txn = _parse(data, path)
    index = _section(data, pb.index_section, path, "index section") if pb.HasField("index_section") else None
    fragments: tuple[Fragment, ...] | FragmentSource
    if source is None:
        fragments = checked_fragments(pb.fragments, path)
        _check_file_versions(pb, fragments, path)
    else:
        fragments = source
    # (a raw manifest's schema is its fields' records, unparsed)
    fields = check_schema(pb.fields, path) if source is None else schema_of(pb.fields, path)

    def pb_fields() -> Any:
        return pb.fields if source is None else parse_fields(pb.fields, path)

    dictionaries = None
    if pb.HasField("data_format") and pb.data_format.version == LEGACY_DATA_FORMAT:
        dictionaries = _decode_dictionaries(data, pos, pb_fields(), path)  # only legacy readers use them
    manifest = Manifest.from_pb(pb, index, dictionaries, fragments=fragments, fields=fields)
    if dictionaries is None and manifest.data_storage_version == LEGACY_DATA_FORMAT:
        manifest = replace(manifest, dictionaries=_decode_dictionaries(data, pos, pb_fields(), path))
    return ManifestFile(manifest, txn, len(data), path)


def _expected_format(pb: Any) -> str | None:
    """The format :func:`_check_file_versions` requires of the data files of a manifest that
    records one (``pb``); None when it requires none (any one format, for :func:`read_fragments`)."""
    if pb.reader_feature_flags & _MIXED_FILE_VERSIONS or pb.data_format.version == LEGACY_DATA_FORMAT:
        return None
    return named_data_format(pb.data_format.version)


@dataclass(frozen=True)
class ManifestSummary:
    """What listing versions needs of a manifest file: no fragments, no schema."""

    version: int
    timestamp_ns: int
    transaction: bytes | None  # the inline serialized Transaction, if present
    transaction_file: str
    fragments: Any = field(default=None, compare=False, repr=False)  # the protobuf fragments, undecoded
    body: bytes = field(default=b"", compare=False, repr=False)  # the manifest protobuf's bytes

    def totals(self) -> dict[str, str]:
        """The version's summary as pylance's ``versions()`` shows it in ``metadata`` (strings):
        fragments, data and deletion files, their rows, the data files' bytes and the live rows.

        A fragment's counts are cached by its protobuf bytes: the versions of a long history share
        most fragments, so listing them costs one serialization per fragment, not a walk of its
        fields."""
        frags = list(self.fragments or ())
        keys = [f.SerializeToString() for f in frags]
        counts = _TOTALS.get_many(keys)
        missing = [i for i, c in enumerate(counts) if c is None]
        if missing:
            for i in missing:
                counts[i] = _fragment_counts(frags[i])
            _TOTALS.put_many((keys[i], counts[i]) for i in missing)  # type: ignore[misc]
        data_rows, data_files, deleted_rows, deletion_files, size = (
            (sum(column) for column in zip(*counts)) if counts else (0, 0, 0, 0, 0)
        )
        return {
            "total_data_file_rows": str(data_rows),
            "total_data_files": str(data_files),
            "total_deletion_file_rows": str(deleted_rows),
            "total_deletion_files": str(deletion_files),
            "total_files_size": str(size),
            "total_fragments": str(len(frags)),
            "total_rows": str(data_rows - deleted_rows),
        }


# A fragment's (rows, data files, deleted rows, deletion files, bytes), by its protobuf bytes (the
# key is the whole content: never stale).
_TOTALS: LRU[bytes, tuple[int, int, int, int, int]] = LRU(FRAGMENT_CACHE_SIZE)


def _fragment_counts(f: Any) -> tuple[int, int, int, int, int]:
    deleted = f.deletion_file.num_deleted_rows if f.HasField("deletion_file") else 0
    return (
        f.physical_rows,
        len(f.files),
        deleted,
        int(f.HasField("deletion_file")),
        sum(d.file_size_bytes for d in f.files),
    )


def decode_manifest_summary(
    data: bytes, path: str, *, skip: tuple[int, int] | None = None
) -> ManifestSummary:
    """Parse the version, time and transaction of a manifest file, leaving its fragments alone.

    ``skip`` is a span ``(start, end)`` of the manifest protobuf (:func:`manifest_body`) holding
    whole records only, its fragment records, found by the caller: that span is not parsed at all,
    and the summary's ``fragments`` are then those outside it (none, when the span held them all).

    Raises:
        CorruptFileError: the framing or the protobuf is damaged.
    """
    pb, pos, txn = _parse(data, path, skip)
    return ManifestSummary(
        pb.version,
        pb.timestamp.seconds * 10**9 + pb.timestamp.nanos,
        txn,
        pb.transaction_file,
        pb.fragments,
        memoryview(data)[pos + 4 : len(data) - MANIFEST_FOOTER_SIZE].tobytes(),
    )


def decode_manifest_head(data: bytes, path: str) -> ManifestSummary:
    """:func:`decode_manifest_summary` without the fragments and the body: the version, time and
    transaction only, for a caller that reads every manifest of a long history (cleanup). The
    schema and the fragment records are skipped as unknown fields, not decoded (about a fifth of
    the cost of a whole parse of a manifest of 500 fragments).

    Raises:
        CorruptFileError: the framing or the protobuf is damaged.
    """
    pb, _pos, txn = _parse(data, path, message=_manifest_head())
    return ManifestSummary(
        pb.version, pb.timestamp.seconds * 10**9 + pb.timestamp.nanos, txn, pb.transaction_file
    )


#: the fields of ``Manifest`` that :func:`decode_manifest_head` reads, as table.proto declares them
_HEAD_FIELDS = (
    "version",
    "timestamp",
    "transaction_file",
    "transaction_section",
    "transaction_section_deprecated",
)
#: the message classes of :func:`_manifest_head` and :func:`_manifest_rest`, made once
_SUBSETS: dict[str, Any] = {}
_HEAD_LOCK = threading.Lock()


def _manifest_head() -> Any:
    """A message of only :data:`_HEAD_FIELDS` of table.proto's ``Manifest``: a parse of a manifest
    with it decodes nothing else (its class made once, by the first caller of any thread)."""
    return _subset("ManifestHead", lambda name: name in _HEAD_FIELDS)()


def _manifest_rest() -> Any:
    """A message of every field of table.proto's ``Manifest`` but its fragments: a parse of a
    manifest with it skips the fragment records (unknown fields to it) without decoding them."""
    return _subset("ManifestRest", lambda name: name != "fragments")()


def _subset(name: str, keep: Any) -> Any:
    found = _SUBSETS.get(name)
    if found is None:
        with _HEAD_LOCK:
            found = _SUBSETS.get(name)
            if found is None:
                found = _SUBSETS[name] = _manifest_subset_class(name, keep)
    return found


def _manifest_subset_class(name: str, keep: Any) -> Any:
    """The class of messages of the fields of table.proto's ``Manifest`` whose names ``keep``
    accepts: the fields' numbers, types and presence are copied from table.proto's descriptor, so
    the two cannot disagree."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    source = descriptor_pb2.FileDescriptorProto()
    table_pb2.DESCRIPTOR.CopyToProto(source)
    manifest = next(m for m in source.message_type if m.name == "Manifest")
    subset = descriptor_pb2.FileDescriptorProto(
        name=f"lance_table/{name}.proto",
        package=f"{source.package}.lance_table_{name.lower()}",
        syntax=source.syntax,
        dependency=[source.name, *source.dependency],
    )
    message = subset.message_type.add(name=name)
    oneofs: dict[int, int] = {}
    for f in manifest.field:
        if keep(f.name):
            copied = message.field.add()
            copied.CopyFrom(f)
            inner = f".{source.package}.Manifest."
            if copied.type_name.startswith(inner):  # a map's entry type: this message's own copy
                copied.type_name = f".{subset.package}.{name}." + copied.type_name[len(inner) :]
            if f.HasField("oneof_index"):  # a proto3 optional field: a oneof of its own
                if f.oneof_index not in oneofs:
                    oneofs[f.oneof_index] = len(message.oneof_decl)
                    message.oneof_decl.add(name=manifest.oneof_decl[f.oneof_index].name)
                copied.oneof_index = oneofs[f.oneof_index]
    for nested in manifest.nested_type:  # (map fields' entry types)
        message.nested_type.add().CopyFrom(nested)
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(subset.name)
    except KeyError:
        pool.Add(subset)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{subset.package}.{name}"))


def decode_manifest_rest(data: bytes, path: str) -> tuple[Manifest, bytes | None] | None:
    """The manifest of a manifest file without its fragments (``fragments`` empty) and its inline
    transaction, for a commit that needs only the rest of the latest version (a restore: its
    version, time, flags and fragment id high-water mark); the fragment records are skipped, not
    decoded. None where the rest depends on the fragments (no ``max_fragment_id`` or no
    ``data_format`` recorded, a legacy dataset): decode the file whole then.

    Raises:
        CorruptFileError: the framing or the protobuf is damaged.
    """
    pb, _pos, txn = _parse(data, path, message=_manifest_rest())
    if not pb.HasField("max_fragment_id") or not pb.HasField("data_format"):
        return None
    if pb.data_format.version == LEGACY_DATA_FORMAT:
        return None
    fields = check_schema(pb.fields, path)
    index = _section(data, pb.index_section, path, "index section") if pb.HasField("index_section") else None
    return Manifest.from_pb(pb, index, fragments=(), fields=fields), txn


def manifest_body(data: bytes, path: str) -> bytes:
    """The manifest protobuf's bytes in a manifest file (the framing checked, nothing parsed).

    Raises:
        CorruptFileError: the framing is damaged.
    """
    return _body(data, path)[1]


def _body(data: bytes, path: str) -> tuple[int, bytes]:
    size = len(data)
    if size < MANIFEST_FOOTER_SIZE + 4:
        raise CorruptFileError(path, f"manifest of {size} bytes is too small")
    if data[-4:] != MANIFEST_MAGIC:
        raise CorruptFileError(path, f"wrong manifest magic {data[-4:]!r}", offset=size - 4)
    (pos, _major, _minor) = MANIFEST_FOOTER.unpack_from(data, size - MANIFEST_FOOTER_SIZE)
    body = _section(data, pos, path, "manifest")
    if pos + 4 + len(body) + MANIFEST_FOOTER_SIZE != size:
        raise CorruptFileError(path, "the manifest does not end where the footer starts", offset=pos)
    return pos, body


def _parse(
    data: bytes, path: str, skip: tuple[int, int] | None = None, message: Any = None
) -> tuple[Any, int, bytes | None]:
    """The manifest protobuf of a manifest file (without the records in the span ``skip`` of it,
    if given; into ``message`` if given, else a whole ``Manifest``), where it starts, and the inline
    transaction.

    Checked: the framing, the timestamp and the transaction file's name.

    Raises:
        CorruptFileError: the framing or the protobuf is damaged.
    """
    pos, body = _body(data, path)
    if skip is not None:
        body = body[: skip[0]] + body[skip[1] :]
    pb = table_pb2.Manifest() if message is None else message
    try:
        pb.ParseFromString(body)
    except (DecodeError, RuntimeError) as exc:
        raise CorruptFileError(path, f"manifest protobuf does not parse ({exc})", offset=pos) from exc
    if pb.HasField("transaction_section"):
        txn: bytes | None = _section(data, pb.transaction_section, path, "inline transaction")
    elif pb.HasField("transaction_section_deprecated"):
        txn = _section(data, pb.transaction_section_deprecated, path, "inline transaction")
    else:
        txn = None
    if pb.transaction_file:
        check_relative_path(pb.transaction_file, path, "transaction file")
    seconds, nanos = pb.timestamp.seconds, pb.timestamp.nanos
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS and 0 <= nanos < 10**9):
        raise CorruptFileError(path, f"timestamp {seconds}s {nanos}ns is out of range")
    return pb, pos, txn


def _section(data: bytes, offset: int, path: str, what: str) -> bytes:
    if offset + 4 > len(data):
        raise CorruptFileError(path, f"{what} offset lies outside the file", offset=offset)
    (length,) = struct.unpack_from("<I", data, offset)
    end = offset + 4 + length
    if end > len(data) - MANIFEST_FOOTER_SIZE:
        raise CorruptFileError(path, f"{what} of {length} bytes runs past the footer", offset=offset)
    return bytes(data[offset + 4 : end])
