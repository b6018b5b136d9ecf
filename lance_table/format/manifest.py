"""Manifests, fragments, data files and deletion files as frozen dataclasses, and the manifest file framing.

A manifest file is ``[dictionary values]?`` ``[u32 len][IndexSection]?`` ``[u32 len][Transaction]``
``[u32 len][Manifest]`` followed by a 16-byte footer ``[u64 manifest_pos][u16 0][u16 2]["LANC"]``. Offsets
point at the u32 lengths.

The dictionary values exist only in legacy (0.1) datasets with dictionary columns: pylance reads such a
column's keys against the values of the *dataset manifest*. Each dictionary field's values are written
one field after another, as in a legacy data file: strings and binaries as their bytes followed by
``n + 1`` little-endian int64 absolute positions (``Field.dictionary.offset`` points at the positions),
numbers PLAIN (the offset points at the values). ``Field.dictionary.length`` is the number of values.
"""

from __future__ import annotations

import re
import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_table._lru import LRU
from lance_table._parallel import after_fork_in_child
from lance_table._proto import table_pb2
from lance_table.errors import (
    CorruptFileError,
    MixedFileVersionsError,
    SchemaError,
    UnsupportedFormatError,
)
from lance_table.format import flags as feature_flags
from lance_table.format import fragment_facts, paths
from lance_table.format.paths import check_relative_path
from lance_table.schema import LanceField, build_tree, fields_from_pb, fields_to_pb, is_binary_like

MANIFEST_MAGIC = b"LANC"
MANIFEST_FOOTER = struct.Struct("<QHH")
MANIFEST_FOOTER_SIZE = 16
# The manifest footer carries the legacy file version 0.2, whatever the data format.
MANIFEST_FOOTER_VERSION = (0, 2)

DELETION_ARROW = "arrow"
DELETION_BITMAP = "bitmap"
# Row addresses are ``fragment_id << 32 | offset``: a fragment holds at most 2**32 rows.
MAX_FRAGMENT_ROWS = 2**32
# The range of google.protobuf.Timestamp (years 1 to 9999).
_MIN_SECONDS = -62135596800
_MAX_SECONDS = 253402300799

WRITER_LIBRARY = "lance_table"
# The data file format of a new dataset, as a manifest records it (``data_format``).
DEFAULT_DATA_FORMAT = ("lance", "2.2")
# The format name of the legacy (v1) data files.
LEGACY_DATA_FORMAT = "0.1"


def data_format_of(major: int, minor: int) -> str:
    """The data format (``data_format.version`` spelling) of a DataFile's recorded (major, minor).

    Writers recorded one format under several numbers: legacy files as (0, 0) (up to pylance 0.16),
    (0, 1) or (0, 2); 2.0 files as (0, 3) (up to pylance 0.16, also their footer) or (2, 0).
    Other numbers are named as they are (``"2.1"``), unknown ones included.
    """
    if major == 0 and minor < 3:
        return LEGACY_DATA_FORMAT
    if (major, minor) == (0, 3):
        return "2.0"
    return f"{major}.{minor}"


@dataclass(frozen=True)
class DataFile:
    """One data file of a fragment: which fields it stores, in which columns."""

    path: str
    fields: tuple[int, ...]
    column_indices: tuple[int, ...]
    file_major_version: int
    file_minor_version: int
    file_size_bytes: int | None = None
    base_id: int | None = None

    @property
    def version(self) -> str:
        """The data format of the file (``"2.0"`` also for files recorded as 0.3; ``"0.1"`` legacy)."""
        return data_format_of(self.file_major_version, self.file_minor_version)

    def to_pb(self, out: Any) -> None:
        out.path = self.path
        out.fields.extend(self.fields)
        out.column_indices.extend(self.column_indices)
        out.file_major_version = self.file_major_version
        out.file_minor_version = self.file_minor_version
        if self.file_size_bytes is not None:
            out.file_size_bytes = self.file_size_bytes
        if self.base_id is not None:
            out.base_id = self.base_id

    @classmethod
    def from_pb(cls, pb: Any) -> DataFile:
        return cls(
            path=pb.path,
            fields=tuple(pb.fields),
            column_indices=tuple(pb.column_indices),
            file_major_version=pb.file_major_version,
            file_minor_version=pb.file_minor_version,
            file_size_bytes=pb.file_size_bytes or None,
            base_id=pb.base_id if pb.HasField("base_id") else None,
        )


@dataclass(frozen=True)
class DeletionFile:
    """A fragment's deleted row offsets, stored in ``_deletions/`` (cumulative)."""

    kind: str  # DELETION_ARROW or DELETION_BITMAP
    read_version: int
    id: int
    num_deleted_rows: int
    base_id: int | None = None

    def path(self, fragment_id: int) -> str:
        """Where the file lives, relative to the dataset root (``_deletions/...``)."""
        return paths.deletion_file_path(fragment_id, self.read_version, self.id, self.kind == DELETION_BITMAP)

    def to_pb(self, out: Any) -> None:
        out.file_type = 1 if self.kind == DELETION_BITMAP else 0
        out.read_version = self.read_version
        out.id = self.id
        out.num_deleted_rows = self.num_deleted_rows
        if self.base_id is not None:
            out.base_id = self.base_id

    @classmethod
    def from_pb(cls, pb: Any) -> DeletionFile:
        return cls(
            kind=DELETION_BITMAP if pb.file_type == 1 else DELETION_ARROW,
            read_version=pb.read_version,
            id=pb.id,
            num_deleted_rows=pb.num_deleted_rows,
            base_id=pb.base_id if pb.HasField("base_id") else None,
        )


# The oneofs of DataFragment that hold row-id and row-version sequences.
_ROW_ID_GROUPS = ("row_id_sequence", "last_updated_at_version_sequence", "created_at_version_sequence")


@dataclass(frozen=True)
class Fragment:
    """A horizontal slice of the table: data files sharing row offsets, plus deletions."""

    id: int
    files: tuple[DataFile, ...]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    # Row-id and row-version sequences, kept as serialized DataFragment bytes and passed through.
    row_id_meta: bytes = b""

    @property
    def num_deleted(self) -> int:
        return self.deletion_file.num_deleted_rows if self.deletion_file else 0

    @cached_property
    def pb_bytes(self) -> bytes:
        """The fragment as a serialized ``DataFragment`` (made once; manifests are built from it)."""
        out = table_pb2.DataFragment()
        self.to_pb(out)
        return out.SerializeToString()

    @cached_property
    def manifest_entry(self) -> bytes:
        """The fragment as an entry of a manifest's repeated ``fragments`` field (its tag, length
        and :attr:`pb_bytes`): a manifest's fragments are these, back to back."""
        return _FRAGMENTS_TAG + _varint(len(self.pb_bytes)) + self.pb_bytes

    @cached_property
    def files_used(self) -> frozenset[str]:
        """The paths (relative to the dataset root) of the fragment's own files: its data files and
        deletion file, not those in other base paths."""
        out = {paths.data_file_path(f.path) for f in self.files if f.base_id is None}
        if self.deletion_file is not None and self.deletion_file.base_id is None:
            out.add(self.deletion_file.path(self.id))
        return frozenset(out)

    @cached_property
    def files_named(self) -> frozenset[str]:
        """The paths its data and deletion files would have under the dataset root, whichever base
        holds them: what cleanup keeps, as pylance keeps files by name (so a registered base that is
        the dataset's own directory never loses a file it holds)."""
        out = {paths.data_file_path(f.path) for f in self.files}
        if self.deletion_file is not None:
            out.add(self.deletion_file.path(self.id))
        return frozenset(out)

    @cached_property
    def formats(self) -> frozenset[str]:
        """The data formats of the fragment's files."""
        return frozenset(f.version for f in self.files)

    @property
    def num_rows(self) -> int:
        """Rows that are not deleted."""
        return self.physical_rows - self.num_deleted

    def to_pb(self, out: Any) -> None:
        if self.row_id_meta:
            out.MergeFromString(self.row_id_meta)
        out.id = self.id
        for f in self.files:
            f.to_pb(out.files.add())
        if self.deletion_file is not None:
            self.deletion_file.to_pb(out.deletion_file)
        out.physical_rows = self.physical_rows

    @classmethod
    def from_pb(cls, pb: Any) -> Fragment:
        meta = b""
        present = [pb.WhichOneof(group) for group in _ROW_ID_GROUPS]
        if any(present):
            keep = table_pb2.DataFragment()
            for name in present:
                if name is None:
                    continue
                value = getattr(pb, name)
                if isinstance(value, bytes):
                    setattr(keep, name, value)
                else:
                    getattr(keep, name).CopyFrom(value)
            meta = keep.SerializeToString()
        return cls(
            id=pb.id,
            files=tuple(DataFile.from_pb(f) for f in pb.files),
            physical_rows=pb.physical_rows,
            deletion_file=DeletionFile.from_pb(pb.deletion_file) if pb.HasField("deletion_file") else None,
            row_id_meta=meta,
        )


@dataclass(frozen=True)
class Manifest:
    """One version of a dataset."""

    fields: tuple[LanceField, ...]
    fragments: tuple[Fragment, ...]
    version: int
    schema_metadata: Mapping[str, bytes] = field(default_factory=dict)
    timestamp_ns: int = 0
    tag: str = ""
    reader_feature_flags: int = 0
    writer_feature_flags: int = 0
    max_fragment_id: int | None = None
    transaction_file: str = ""
    writer_library: str = WRITER_LIBRARY
    writer_version: str = ""
    next_row_id: int = 0
    data_format: tuple[str, str] | None = DEFAULT_DATA_FORMAT
    config: Mapping[str, str] = field(default_factory=dict)
    table_metadata: Mapping[str, str] = field(default_factory=dict)
    # Things lance_table carries forward untouched: the index section and other manifest fields.
    index_section: bytes | None = None
    passthrough: bytes = b""
    # Legacy datasets: the values of each dictionary field, by field id (written into the manifest
    # file; data files' keys index them, and appends may only extend them).
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict, compare=False)

    @cached_property
    def data_formats(self) -> frozenset[str]:
        """The data formats of the manifest's data files."""
        return fragment_facts.facts(tuple(self.fragments)).formats

    @property
    def data_storage_version(self) -> str | None:
        """The data file format version new files must use (e.g. ``"2.0"``), if recorded."""
        return self.data_format[1] if self.data_format else None

    @property
    def num_rows(self) -> int:
        return sum(f.num_rows for f in self.fragments)

    def with_flags(self) -> Manifest:
        """This manifest with its feature flags recomputed from its contents."""
        found = fragment_facts.facts(tuple(self.fragments))
        reader, writer = feature_flags.compute(
            has_deletions=found.deletions,
            has_row_ids=bool(self.reader_feature_flags & feature_flags.STABLE_ROW_IDS) or found.row_ids,
            has_config=bool(self.config),
            has_base_paths=_has_base_paths(self.passthrough),
        )
        return replace(self, reader_feature_flags=reader, writer_feature_flags=writer)

    def to_pb(
        self,
        transaction_offset: int | None,
        index_offset: int | None,
        dictionary_positions: Mapping[int, tuple[int, int]] | None = None,
        with_fragments: bool = True,
    ) -> Any:
        """The ``lance.table.Manifest`` protobuf; ``dictionary_positions`` gives the ``(offset, length)``
        of dictionary fields' values in the manifest file. Without ``with_fragments``, the
        fragments are left out (see :attr:`Fragment.manifest_entry`)."""
        pb = table_pb2.Manifest()
        if self.passthrough:
            pb.MergeFromString(self.passthrough)
        fields_to_pb(self.fields, pb.fields)
        for pf in pb.fields:
            if dictionary_positions and pf.id in dictionary_positions:
                pf.dictionary.offset, pf.dictionary.length = dictionary_positions[pf.id]
        if with_fragments:
            for f in self.fragments:
                pb.fragments.add().MergeFromString(f.pb_bytes)
        pb.version = self.version
        for k, v in self.schema_metadata.items():
            pb.schema_metadata[k] = v
        if index_offset is not None:
            pb.index_section = index_offset
        pb.timestamp.seconds, pb.timestamp.nanos = divmod(self.timestamp_ns, 10**9)
        pb.tag = self.tag
        pb.reader_feature_flags = self.reader_feature_flags
        pb.writer_feature_flags = self.writer_feature_flags
        if self.max_fragment_id is not None:
            pb.max_fragment_id = self.max_fragment_id
        pb.transaction_file = self.transaction_file
        pb.writer_version.library = self.writer_library
        pb.writer_version.version = self.writer_version
        pb.next_row_id = self.next_row_id
        if self.data_format is not None:
            pb.data_format.file_format, pb.data_format.version = self.data_format
        pb.config.update(self.config)
        pb.table_metadata.update(self.table_metadata)
        if transaction_offset is not None:
            pb.transaction_section = transaction_offset
        return pb

    @classmethod
    def from_pb(
        cls,
        pb: Any,
        index_section: bytes | None = None,
        dictionaries: Mapping[int, pa.Array] | None = None,
        fragments: tuple[Fragment, ...] | None = None,
    ) -> Manifest:
        rest = table_pb2.Manifest()
        for name in ("base_paths", "branch", "version_aux_data"):
            if name == "base_paths":
                rest.base_paths.extend(pb.base_paths)
            elif name == "branch" and pb.HasField("branch"):
                rest.branch = pb.branch
            elif name == "version_aux_data":
                rest.version_aux_data = pb.version_aux_data
        return cls(
            fields=tuple(fields_from_pb(pb.fields)),
            fragments=fragments
            if fragments is not None
            else tuple(Fragment.from_pb(f) for f in pb.fragments),
            version=pb.version,
            schema_metadata=dict(pb.schema_metadata),
            timestamp_ns=pb.timestamp.seconds * 10**9 + pb.timestamp.nanos,
            tag=pb.tag,
            reader_feature_flags=pb.reader_feature_flags,
            writer_feature_flags=pb.writer_feature_flags,
            max_fragment_id=pb.max_fragment_id if pb.HasField("max_fragment_id") else None,
            transaction_file=pb.transaction_file,
            writer_library=pb.writer_version.library,
            writer_version=pb.writer_version.version,
            next_row_id=pb.next_row_id,
            data_format=(pb.data_format.file_format, pb.data_format.version)
            if pb.HasField("data_format")
            else _inferred_data_format(pb),
            config=dict(pb.config),
            table_metadata=dict(pb.table_metadata),
            index_section=index_section,
            passthrough=rest.SerializeToString(),
            dictionaries=dict(dictionaries or {}),
        )


def _inferred_data_format(pb: Any) -> tuple[str, str]:
    """The data format of a manifest that does not record one (written before pylance 0.15), as
    pylance infers it: from the first data file; with no data files, 2.x if the writer flag of the
    v2 format is set (as "stable", which is the default now), else legacy."""
    for frag in pb.fragments:
        for f in frag.files:
            return ("lance", data_format_of(f.file_major_version, f.file_minor_version))
    if pb.writer_feature_flags & feature_flags.USE_V2_FORMAT_DEPRECATED:
        return DEFAULT_DATA_FORMAT
    return ("lance", LEGACY_DATA_FORMAT)


def _has_base_paths(passthrough: bytes) -> bool:
    if not passthrough:
        return False
    pb = table_pb2.Manifest()
    pb.MergeFromString(passthrough)
    return len(pb.base_paths) > 0


# ---------------------------------------------------------------------------------------------
# framing


@dataclass(frozen=True)
class ManifestFile:
    """The decoded sections of one manifest file."""

    manifest: Manifest
    transaction: bytes | None  # the inline serialized Transaction, if present
    size: int
    path: str = ""  # where the file was read from, for error messages


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# the tag of an entry of the Manifest's repeated ``fragments`` field (length-delimited)
_FRAGMENTS_TAG = _varint(table_pb2.Manifest.DESCRIPTOR.fields_by_name["fragments"].number << 3 | 2)


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
    body = pb.SerializeToString() + b"".join([f.manifest_entry for f in manifest.fragments])
    manifest_pos = len(out)
    out += struct.pack("<I", len(body)) + body
    out += MANIFEST_FOOTER.pack(manifest_pos, *MANIFEST_FOOTER_VERSION) + MANIFEST_MAGIC
    return bytes(out)


def decode_manifest_file(data: bytes, path: str) -> ManifestFile:
    """Parse a manifest file.

    Raises:
        CorruptFileError: the framing or the protobuf is damaged.
    """
    pb, pos, txn = _parse(data, path)
    index = _section(data, pb.index_section, path, "index section") if pb.HasField("index_section") else None
    fragments = checked_fragments(pb.fragments, path)
    _check_file_versions(pb, fragments, path)
    check_schema(pb.fields, path)
    manifest = Manifest.from_pb(pb, index, fragments=fragments)
    if manifest.data_storage_version == LEGACY_DATA_FORMAT:  # only legacy readers use the values
        manifest = replace(manifest, dictionaries=_decode_dictionaries(data, pos, pb.fields, path))
    return ManifestFile(manifest, txn, len(data), path)


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
        with _TOTALS_LOCK:
            counts = [_TOTALS.get(key) for key in keys]
        missing = [i for i, c in enumerate(counts) if c is None]
        if missing:
            for i in missing:
                counts[i] = _fragment_counts(frags[i])
            with _TOTALS_LOCK:
                if len(_TOTALS) > FRAGMENT_CACHE_SIZE:
                    _TOTALS.clear()
                for i in missing:
                    _TOTALS[keys[i]] = counts[i]  # type: ignore[assignment]
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


# A fragment's (rows, data files, deleted rows, deletion files, bytes), by its protobuf bytes.
_TOTALS: dict[bytes, tuple[int, int, int, int, int]] = {}
_TOTALS_LOCK = threading.Lock()


def _new_totals_lock() -> None:
    global _TOTALS_LOCK
    _TOTALS_LOCK = threading.Lock()  # a forked child: another thread may have held it at the fork


after_fork_in_child(_new_totals_lock)


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


def _parse(data: bytes, path: str, skip: tuple[int, int] | None = None) -> tuple[Any, int, bytes | None]:
    """The manifest protobuf of a manifest file (without the records in the span ``skip`` of it,
    if given), where it starts, and the inline transaction.

    Checked: the framing, the timestamp and the transaction file's name.

    Raises:
        CorruptFileError: the framing or the protobuf is damaged.
    """
    pos, body = _body(data, path)
    if skip is not None:
        body = body[: skip[0]] + body[skip[1] :]
    pb = table_pb2.Manifest()
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


# ---------------------------------------------------------------------------------------------
# dictionary values (legacy datasets)


def _is_plain(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _dictionary_value_types(fields: tuple[LanceField, ...] | list[LanceField]) -> dict[int, pa.DataType]:
    """The value type of every dictionary field, by id."""
    return {
        node.id: node.arrow_type.value_type
        for root in build_tree(fields)
        for node in root.walk()
        if pa.types.is_dictionary(node.arrow_type)
    }


def _encode_dictionaries(manifest: Manifest, out: bytearray) -> dict[int, tuple[int, int]]:
    """Append the dictionary values of ``manifest``'s dictionary fields to ``out`` (at the start of
    the manifest file); return each field's ``(offset, length)``. A dictionary field without values
    gets an empty dictionary."""
    placed: dict[int, tuple[int, int]] = {}
    if manifest.data_storage_version != LEGACY_DATA_FORMAT:
        return placed  # 2.x files keep their dictionaries in their pages
    if not any(f.logical_type.startswith("dict:") for f in manifest.fields):
        return placed
    for fid, t in sorted(_dictionary_value_types(list(manifest.fields)).items()):
        values = manifest.dictionaries.get(fid)
        if values is None:
            values = pa.array([], t)
        if values.type != t:
            raise SchemaError(f"dictionary of field {fid} holds {values.type}, not {t}")
        if is_binary_like(t):
            width = np.int64 if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else np.int32
            offs = np.frombuffer(values.buffers()[1], width, len(values) + 1, values.offset).astype(np.int64)
            data = values.buffers()[2]
            start = len(out)
            if data is not None and offs[-1] > offs[0]:
                out += data.to_pybytes()[offs[0] : offs[-1]]
            positions = offs - offs[0] + start
            placed[fid] = (len(out), len(values))
            out += positions.astype("<i8").tobytes()
        elif _is_plain(t):
            placed[fid] = (len(out), len(values))
            buf = values.buffers()[1]
            width = t.bit_width // 8
            if buf is not None and len(values):
                out += buf.to_pybytes()[values.offset * width : (values.offset + len(values)) * width]
        else:
            raise SchemaError(f"dictionary of field {fid}: values of type {t} are not written")
    return placed


def _decode_dictionaries(data: bytes, limit: int, pb_fields: Any, path: str) -> dict[int, pa.Array]:
    """The dictionary values the manifest's fields locate, all of them inside ``data[:limit]``.

    Raises:
        CorruptFileError: a dictionary's offset or length, or its value positions, lie outside the
            values section, or strings are not UTF-8.
    """
    located = {
        pf.id: (int(pf.dictionary.offset), int(pf.dictionary.length))
        for pf in pb_fields
        if pf.HasField("dictionary")
    }
    if not located:
        return {}
    types = _dictionary_value_types(fields_from_pb(pb_fields))
    out: dict[int, pa.Array] = {}
    for fid, (offset, length) in located.items():
        t = types.get(fid)
        if t is None:
            continue  # not a dictionary field: the location means nothing
        if offset < 0 or length < 0:
            raise CorruptFileError(path, f"dictionary of field {fid} at ({offset}, {length}) is negative")
        if is_binary_like(t):
            if offset + (length + 1) * 8 > limit:
                raise CorruptFileError(
                    path,
                    f"dictionary of field {fid}: {length} value positions at {offset} run past "
                    "the values section",
                )
            pos = np.frombuffer(data, "<i8", length + 1, offset).astype(np.int64)
            if pos[0] < 0 or pos[-1] > limit or np.any(np.diff(pos) < 0):
                raise CorruptFileError(
                    path,
                    f"dictionary of field {fid}: value positions are not increasing inside the file",
                    offset=offset,
                )
            lengths = np.diff(pos)
            offsets = np.zeros(length + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
            if not large and offsets[-1] > (1 << 31) - 1:
                raise UnsupportedFormatError(f"dictionary of field {fid} is too large for {t}", path=path)
            valid = lengths != 0  # as in legacy data files, an empty value reads as null
            nulls = int(length - np.count_nonzero(valid))
            validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes()) if nulls else None
            arr = pa.Array.from_buffers(
                t,
                length,
                [
                    validity,
                    pa.py_buffer(offsets.astype(np.int64 if large else np.int32).tobytes()),
                    pa.py_buffer(bytes(data[int(pos[0]) : int(pos[-1])])),
                ],
                nulls,
            )
            if pa.types.is_string(t) or pa.types.is_large_string(t):
                try:
                    arr.validate(full=True)
                except pa.ArrowInvalid as exc:
                    raise CorruptFileError(
                        path, f"dictionary of field {fid} is not valid UTF-8: {exc}"
                    ) from exc
            out[fid] = arr
        elif _is_plain(t):
            width = t.bit_width // 8
            if offset + length * width > limit:
                raise CorruptFileError(
                    path,
                    f"dictionary of field {fid}: {length} values at {offset} run past the values section",
                )
            raw = bytes(data[offset : offset + length * width])
            out[fid] = pa.Array.from_buffers(t, length, [None, pa.py_buffer(raw)])
        else:
            raise UnsupportedFormatError(
                f"dictionary values of type {t} (field {fid}) are not supported", path=path
            )
    return out


def check_fragments(fragments: Iterable[Any], where: str) -> None:
    """Refuse ``DataFragment`` protobufs whose paths or row counts cannot be trusted.

    Data file paths must stay inside ``data/``; a deletion file must be of a known kind and delete
    between 1 and ``physical_rows`` rows (pylance records the count; 0 would mean "unknown", which
    the manifest-only ``count_rows()`` cannot honour); ``physical_rows`` fits a row address.
    Whether the counts match the files is checked when the files are read.

    Raises:
        CorruptFileError: naming ``where``, the manifest or transaction being decoded.
    """
    for frag in fragments:
        for f in frag.files:
            check_relative_path(f.path, where, f"data file of fragment {frag.id}")
        rows = frag.physical_rows
        if rows > MAX_FRAGMENT_ROWS:
            raise CorruptFileError(where, f"fragment {frag.id} has {rows} physical rows, more than 2**32")
        if frag.HasField("deletion_file"):
            df = frag.deletion_file
            if df.file_type not in (0, 1):
                raise CorruptFileError(
                    where, f"fragment {frag.id} has a deletion file of unknown type {df.file_type}"
                )
            if not 0 < df.num_deleted_rows <= rows:
                raise CorruptFileError(
                    where,
                    f"fragment {frag.id} deletes {df.num_deleted_rows} of its {rows} rows "
                    "(a deletion file deletes between 1 and physical_rows rows)",
                )


# Fragments already checked and converted, by their serialized protobuf: consecutive versions share
# almost all their fragments, so a history of N versions converts each fragment once, not N times.
FRAGMENT_CACHE_SIZE = 65_536
_FRAGMENTS: LRU[bytes, Fragment] = LRU(FRAGMENT_CACHE_SIZE)


def checked_fragments(pbs: Any, where: str) -> tuple[Fragment, ...]:
    """``DataFragment`` protobufs checked (see :func:`check_fragments`) and converted.

    Raises:
        CorruptFileError: naming ``where``.
    """
    keys = [pb.SerializeToString() for pb in pbs]
    found = _FRAGMENTS.get_many(keys)
    missing = [i for i, frag in enumerate(found) if frag is None]
    if missing:
        new = [pbs[i] for i in missing]
        check_fragments(new, where)
        made = [Fragment.from_pb(pb) for pb in new]
        for i, frag in zip(missing, made):
            frag.__dict__["pb_bytes"] = keys[i]  # what pb_bytes would make: the same protobuf
            found[i] = frag
        _FRAGMENTS.put_many((keys[i], frag) for i, frag in zip(missing, made))
    return tuple(found)  # type: ignore[arg-type]


# Reader flag that lets data files of one dataset use different format versions.
_MIXED_FILE_VERSIONS = 256
_FORMAT_NUMBER = re.compile(r"(\d{1,9})\.(\d{1,9})")


def _check_file_versions(pb: Any, fragments: tuple[Fragment, ...], path: str) -> None:
    """All data files must be of one format: the manifest's ``data_format`` (unless the flag of mixed
    versions is set) or, when it records none, the first file's. pylance requires both."""
    if pb.reader_feature_flags & _MIXED_FILE_VERSIONS:
        return
    if pb.HasField("data_format"):
        if pb.data_format.version == LEGACY_DATA_FORMAT:
            # pylance 0.16 could record 0.1 for 2.0 files: every file is read as its own format,
            # and the next commit records the files' format (see corrected_data_format)
            return
        named = _FORMAT_NUMBER.fullmatch(pb.data_format.version)
        if named is None:
            return  # a format name lance_table does not know: refused when the data is read
        expected = data_format_of(int(named.group(1)), int(named.group(2)))
        whose = "the manifest's"
    else:
        expected = _inferred_data_format(pb)[1]
        whose = "the first data file's"
    for frag in fragments:
        if frag.formats == {expected}:
            continue
        for f in frag.files:
            actual = f.version
            if actual != expected:
                raise CorruptFileError(
                    path,
                    f"data file {f.path} of fragment {frag.id} has format {actual} "
                    f"(recorded as {f.file_major_version}.{f.file_minor_version}), "
                    f"{whose} format is {expected}",
                )


def corrected_data_format(m: Manifest, path: str) -> tuple[str, str] | None:
    """The format a manifest recording the legacy format 0.1 must record instead: its data files'
    one newer format (pylance 0.16 could record 0.1 for 2.0 files; pylance fixes it at the next
    commit, as this does); None when the record is right.

    Raises:
        MixedFileVersionsError: the files are of several formats (naming ``path``).
    """
    if m.data_storage_version != LEGACY_DATA_FORMAT:
        return None
    formats = m.data_formats
    if len(formats) > 1:
        raise MixedFileVersionsError(
            f"{path}: The dataset contains a mixture of file versions.  You will need to rollback "
            f"to an earlier version: its data files are of formats {', '.join(sorted(formats))} "
            f"while the manifest records {LEGACY_DATA_FORMAT}"
        )
    if formats and next(iter(formats)) != LEGACY_DATA_FORMAT:
        return ("lance", next(iter(formats)))
    return None


def check_schema(pb_fields: Iterable[Any], where: str) -> None:
    """Refuse a schema (a repeated ``lance.file.Field``) that does not form a valid field tree.

    Raises:
        UnsupportedFormatError: a logical type lance_table does not know (naming ``where``).
        CorruptFileError: any other problem (repeated ids, dangling parents, bad children ...).
    """
    try:
        build_tree(fields_from_pb(pb_fields))
    except SchemaError as exc:
        if "unknown logical type" in str(exc):
            raise UnsupportedFormatError(f"schema: {exc}", path=where) from exc
        raise CorruptFileError(where, f"schema is invalid ({exc})") from exc


def _section(data: bytes, offset: int, path: str, what: str) -> bytes:
    if offset + 4 > len(data):
        raise CorruptFileError(path, f"{what} offset lies outside the file", offset=offset)
    (length,) = struct.unpack_from("<I", data, offset)
    end = offset + 4 + length
    if end > len(data) - MANIFEST_FOOTER_SIZE:
        raise CorruptFileError(path, f"{what} of {length} bytes runs past the footer", offset=offset)
    return bytes(data[offset + 4 : end])


def assign_fragment_ids(fragments: Iterable[Fragment], start: int) -> list[Fragment]:
    """Give the fragments whose id is 0 (not yet given one) consecutive ids from ``start``; other
    ids stay, as pylance keeps the ids a caller chose (``LanceFragment.create(fragment_id=)``)."""
    out = []
    for f in fragments:
        if f.id == 0:
            f = replace(f, id=start)
            start += 1
        out.append(f)
    return out
