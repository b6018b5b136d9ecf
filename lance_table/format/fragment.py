"""Fragments, data files and deletion files as frozen dataclasses, and the checks and conversion of
the ``DataFragment`` protobufs a manifest or transaction holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any

from google.protobuf.message import DecodeError

from lance_table._lru import LRU
from lance_table._proto import table_pb2
from lance_table.errors import CorruptFileError
from lance_table.format import paths
from lance_table.format.paths import check_relative_path

DELETION_ARROW = "arrow"
DELETION_BITMAP = "bitmap"
# Row addresses are ``fragment_id << 32 | offset``: a fragment holds at most 2**32 rows.
MAX_FRAGMENT_ROWS = 2**32
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


@lru_cache(maxsize=64)
def _format_set(major: int, minor: int) -> frozenset[str]:
    """The formats of a fragment of one data file recorded as (``major``, ``minor``)."""
    return frozenset((data_format_of(major, minor),))


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
        # made without the frozen dataclass's __init__ (a setattr through object per field): a
        # manifest of a long history converts thousands of these on a first open
        out = object.__new__(cls)
        out.__dict__.update(
            path=pb.path,
            fields=tuple(pb.fields[:]),  # (a slice is one list made at once: faster than iterating)
            column_indices=tuple(pb.column_indices[:]),
            file_major_version=pb.file_major_version,
            file_minor_version=pb.file_minor_version,
            file_size_bytes=pb.file_size_bytes or None,
            base_id=pb.base_id if pb.HasField("base_id") else None,
        )
        return out


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
        out = object.__new__(cls)  # (see DataFile.from_pb)
        out.__dict__.update(
            kind=DELETION_BITMAP if pb.file_type == 1 else DELETION_ARROW,
            read_version=pb.read_version,
            id=pb.id,
            num_deleted_rows=pb.num_deleted_rows,
            base_id=pb.base_id if pb.HasField("base_id") else None,
        )
        return out


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
        files = self.files
        if len(files) == 1:  # most fragments: one set per recorded version, shared
            return _format_set(files[0].file_major_version, files[0].file_minor_version)
        return frozenset(f.version for f in files)

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
        if present[0] or present[1] or present[2]:
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
        out = object.__new__(cls)  # (see DataFile.from_pb)
        out.__dict__.update(
            id=pb.id,
            files=tuple([DataFile.from_pb(f) for f in pb.files]),
            physical_rows=pb.physical_rows,
            deletion_file=DeletionFile.from_pb(pb.deletion_file) if pb.HasField("deletion_file") else None,
            row_id_meta=meta,
        )
        return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# the tag of an entry of the Manifest's repeated ``fragments`` field (length-delimited)
_FRAGMENTS_TAG = _varint(table_pb2.Manifest.DESCRIPTOR.fields_by_name["fragments"].number << 3 | 2)


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
        made = [_checked_fragment(pb, where) for pb in new]
        for i, frag in zip(missing, made):
            frag.__dict__["pb_bytes"] = keys[i]  # what pb_bytes would make: the same protobuf
            found[i] = frag
        _FRAGMENTS.put_many((keys[i], frag) for i, frag in zip(missing, made))
    return tuple(found)  # type: ignore[arg-type]


def checked_raw_fragments(raws: Sequence[bytes], where: str) -> tuple[Fragment, ...]:
    """:func:`checked_fragments` of serialized ``DataFragment`` protobufs (the bytes of each stay
    its :attr:`Fragment.pb_bytes`).

    Raises:
        CorruptFileError: naming ``where``; also when a protobuf does not parse.
    """
    found = _FRAGMENTS.get_many(raws)
    missing = [i for i, frag in enumerate(found) if frag is None]
    if missing:
        made = []
        for i in missing:
            try:
                pb = table_pb2.DataFragment.FromString(raws[i])
            except (DecodeError, RuntimeError) as exc:
                raise CorruptFileError(where, f"fragment {i} of the manifest does not parse ({exc})") from exc
            frag = _checked_fragment(pb, where)
            frag.__dict__["pb_bytes"] = raws[i]
            found[i] = frag
            made.append((raws[i], frag))
        _FRAGMENTS.put_many(made)
    return tuple(found)  # type: ignore[arg-type]


def _checked_fragment(pb: Any, where: str) -> Fragment:
    """``check_fragments`` and ``Fragment.from_pb`` of one fragment, in one pass over its fields
    for the common one (data files, no deletion file, no row-id sequences): a first open of a long
    history converts thousands.

    Raises:
        CorruptFileError: naming ``where``.
    """
    rows = pb.physical_rows
    if (
        rows > MAX_FRAGMENT_ROWS
        or pb.HasField("deletion_file")
        or pb.WhichOneof("row_id_sequence")
        or pb.WhichOneof("last_updated_at_version_sequence")
        or pb.WhichOneof("created_at_version_sequence")
    ):
        check_fragments((pb,), where)
        return Fragment.from_pb(pb)
    files = []
    for f in pb.files[:]:
        check_relative_path(f.path, where, f"data file of fragment {pb.id}")
        files.append(DataFile.from_pb(f))
    out = object.__new__(Fragment)  # (see DataFile.from_pb)
    out.__dict__.update(id=pb.id, files=tuple(files), physical_rows=rows, deletion_file=None, row_id_meta=b"")
    if len(files) == 1:  # what ``formats`` would find, without the cached property's lookup
        out.__dict__["formats"] = _format_set(files[0].file_major_version, files[0].file_minor_version)
    return out


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
