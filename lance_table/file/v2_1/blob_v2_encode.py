"""Writing blob v2 columns of format 2.2 files: descriptors, inline buffers and sidecar files.

A blob v2 field arrives as its logical struct (``data: large_binary, uri: string`` and optionally
``position, size``). Each valid value is stored where its size says, as pylance 14 does:

* up to the inline threshold (64 KiB): an out-of-line buffer of the data file itself, written at
  once (an empty value is not written: its position is the file's current offset);
* above the dedicated threshold (4 MiB): a sidecar file of its own;
* otherwise: appended to the column's open packed sidecar, which is replaced by a new one when the
  blob would take it past the pack file threshold (1 GiB).

Sidecars are named by ids counted from 1 per data file, in the order they are opened
(:func:`blob_v2.blob_file_name`). The column then holds one descriptor per row
(:data:`blob_v2.DESCRIPTOR`), in full-zip pages with ``variable_packed_struct`` compression
(:mod:`packed_var_encode`, as any packed struct with a variable-width child); a null blob is a
null descriptor. The file schema names the column as the descriptor struct followed by
its five children without ids (:func:`file_fields`). See ``docs/blob_v2.md``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import IO, Any

import numpy as np
import pyarrow as pa

from lance_table.blob_descriptors import DescriptorKind, check_managed_uri
from lance_table.errors import SchemaError, UnsupportedFormatError
from lance_table.file.v2_1 import repdef
from lance_table.file.v2_1.blob_v2 import (
    DESCRIPTOR_FIELDS,
    DESCRIPTOR_METADATA,
    BlobKind,
    blob_file_name,
    is_blob_v2,
)
from lance_table.file.v2_1.fullzip_encode import encode_full_zip
from lance_table.file.v2_1.packed_var_encode import pack_rows
from lance_table.file.v2_1.values_encode import PerValue
from lance_table.schema import ENCODING_NONE, ENCODING_PLAIN, ENCODING_VAR_BINARY, FieldNode, LanceField

INLINE_THRESHOLD_KEY = "lance-encoding:blob-inline-size-threshold"
DEDICATED_THRESHOLD_KEY = "lance-encoding:blob-dedicated-size-threshold"
PACK_FILE_THRESHOLD_KEY = "lance-encoding:blob-pack-file-size-threshold"
DEFAULT_INLINE_THRESHOLD = 64 * 1024
DEFAULT_DEDICATED_THRESHOLD = 4 * 1024 * 1024
DEFAULT_PACK_FILE_THRESHOLD = 1024**3

# (layout, buffers, rows, first row), as :data:`encode.PageSink`
PageSink = Callable[[Any, list[Any], int, int], None]
# Writes one out-of-line buffer of the data file and returns its offset.
InlineSink = Callable[[Any], int]
# Opens a sidecar of the data file being written, by file name.
SidecarOpener = Callable[[str], IO[bytes]]
# How an external blob's URI is stored: (base path id, URI relative to it), or (0, the URI).
ExternalRefs = Callable[[str], tuple[int, str]]

# One descriptor without its URI bytes: kind, position, size, blob_id, URI length (25 bytes).
_FIXED = np.dtype([("kind", "u1"), ("position", "<u8"), ("size", "<u8"), ("blob_id", "<u4"), ("uri", "<u4")])


@dataclass(frozen=True)
class Thresholds:
    """Where blobs go by size (bytes): inline up to ``inline``, dedicated above ``dedicated``,
    packed sidecars closed before they pass ``pack_file``."""

    inline: int = DEFAULT_INLINE_THRESHOLD
    dedicated: int = DEFAULT_DEDICATED_THRESHOLD
    pack_file: int = DEFAULT_PACK_FILE_THRESHOLD

    @classmethod
    def of(cls, field: LanceField) -> Thresholds:
        """The thresholds a field's metadata sets (pylance's keys), defaults elsewhere.

        Raises:
            SchemaError: a threshold is not a non-negative integer (positive for the last two).
        """
        values = {}
        for attr, key, least in (
            ("inline", INLINE_THRESHOLD_KEY, 0),
            ("dedicated", DEDICATED_THRESHOLD_KEY, 1),
            ("pack_file", PACK_FILE_THRESHOLD_KEY, 1),
        ):
            raw = field.metadata.get(key)
            if raw is None:
                continue
            try:
                value = int(raw.decode() if isinstance(raw, bytes) else raw)
            except ValueError:
                value = -1
            if value < least:
                raise SchemaError(f"field {field.name!r}: {key} is {raw!r}, not an integer >= {least}")
            values[attr] = value
        return cls(**values)


def file_fields(fields: Iterable[LanceField]) -> list[LanceField]:
    """The fields a 2.2 data file's schema stores for dataset ``fields``: each blob v2 struct
    becomes the descriptor struct (blob and packed metadata) followed by its five children with
    id -1 and parent -1, as pylance writes them; the struct's own children are left out."""
    out: list[LanceField] = []
    blob_ids: set[int] = set()
    for f in fields:
        if f.parent_id in blob_ids:
            blob_ids.add(f.id)
            continue
        if not is_blob_v2(f):
            out.append(f)
            continue
        blob_ids.add(f.id)
        out.append(replace(f, metadata=dict(DESCRIPTOR_METADATA), encoding=ENCODING_NONE))
        for name, _, logical in DESCRIPTOR_FIELDS:
            encoding = ENCODING_VAR_BINARY if logical == "string" else ENCODING_PLAIN
            out.append(LanceField(-1, -1, name, logical, nullable=False, encoding=encoding))
    return out


def _descriptors(fixed: np.ndarray, uris: list[bytes] | None) -> pa.StructArray:
    """The descriptor rows as Arrow: ``fixed`` (:data:`_FIXED` records) and their ``uris``
    (None: all empty)."""
    n = len(fixed)
    if uris is None:
        offsets = pa.py_buffer(np.zeros(n + 1, np.int32))
        uri = pa.Array.from_buffers(pa.utf8(), n, [None, offsets, pa.py_buffer(b"")])
    else:  # the descriptor's blob_uri is a string (FSST may compress it, as pylance does)
        uri = pa.array(uris, pa.binary()).cast(pa.utf8())
    children = [pa.array(fixed[name]) for name, _, _ in DESCRIPTOR_FIELDS[:-1]]
    return pa.StructArray.from_arrays([*children, uri], names=[name for name, _, _ in DESCRIPTOR_FIELDS])


def encode_descriptor_page(
    fixed: np.ndarray, uris: list[bytes] | None, valid: np.ndarray
) -> tuple[Any, list[bytes]]:
    """The full-zip page of one descriptor per row: ``fixed`` (:data:`_FIXED` records of the valid
    rows), their ``uris`` (None: all empty) and each row's validity. The rows are packed as any
    packed struct with a variable-width child (:func:`packed_var_encode.pack_rows`: the URIs
    compressed as pylance compresses them, FSST when that pays)."""
    pv = pack_rows(_descriptors(fixed, uris), what="blob descriptors")
    assert pv.lengths is not None  # packed rows are variable-width
    all_lengths = np.zeros(int(valid.size), np.int64)
    all_lengths[valid] = pv.lengths
    pv = PerValue(pv.encoding, pv.data, lengths=all_lengths, offset_bits=pv.offset_bits)
    if bool(valid.all()):
        return encode_full_zip(pv, None, None, None, [repdef.ALL_VALID_ITEM], 0)
    defs = np.where(valid, 0, 1).astype(np.uint16)
    return encode_full_zip(pv, None, defs, None, [repdef.NULLABLE_ITEM], 0)


def _external_refs(
    arr: pa.StructArray, external: np.ndarray, names: list[str]
) -> dict[int, tuple[str, int, int]]:
    """The external values of ``arr``: row -> (URI, position, size; 0, 0 for the whole object)."""
    rows = np.flatnonzero(external)
    picked = pa.array(rows)
    uris = arr.field("uri").take(picked).to_pylist()
    where = [
        arr.field(k).take(picked).fill_null(0).to_pylist() if k in names else [0] * len(rows)
        for k in ("position", "size")
    ]
    return {int(r): (u, int(p), int(s)) for r, u, p, s in zip(rows, uris, *where)}


class SidecarFiles:
    """The sidecar ``.blob`` files of one data file: ids from 1, in opening order.

    Args:
        opener: opens a sidecar by file name (None: blobs too large to be inline are refused).
    """

    def __init__(self, opener: SidecarOpener | None) -> None:
        self.opener = opener
        self.next_id = 1
        self.open_files: dict[int, IO[bytes]] = {}

    def open(self, field: str) -> tuple[int, IO[bytes]]:
        """A new sidecar: its id and stream.

        Raises:
            UnsupportedFormatError: the writer has no place for sidecars (a file written alone).
        """
        if self.opener is None:
            raise UnsupportedFormatError(
                f"field {field!r}: blobs larger than the inline threshold go to sidecar files, "
                "which only dataset writes create"
            )
        blob_id = self.next_id
        stream = self.opener(blob_file_name(blob_id))
        self.next_id += 1
        self.open_files[blob_id] = stream
        return blob_id, stream

    def close_one(self, blob_id: int) -> None:
        """Finish a sidecar (it then appears complete)."""
        self.open_files.pop(blob_id).close()

    def close(self) -> None:
        """Finish every sidecar still open."""
        for blob_id in list(self.open_files):
            self.close_one(blob_id)

    def abort(self) -> None:
        """Close what is open without caring whether it completes (the caller removes the files)."""
        for stream in self.open_files.values():
            with contextlib.suppress(Exception):  # aborting: the files are deleted anyway
                stream.close()
        self.open_files.clear()


class BlobV2ColumnWriter:
    """Writes one top-level blob v2 field of a 2.2 file: blobs as they arrive, descriptor pages of
    about ``page_size_bytes``.

    A value with a ``uri`` is an external reference (kind 3, with the ``position`` and ``size``
    given, 0 for the whole object), stored as ``externals`` says (see
    :func:`lance_table.table.blob_locations.external_reference`).

    Raises:
        UnsupportedFormatError: a value is an external URI and there are no ``externals``, or a
            value needs a sidecar and there is no place for one.
        BlobLocationError: ``externals`` refuses an external URI.
        SchemaError: a valid value sets neither ``data`` nor ``uri``.
    """

    def __init__(
        self,
        node: FieldNode,
        pages: PageSink,
        inline: InlineSink,
        sidecars: SidecarFiles,
        page_size_bytes: int,
        externals: ExternalRefs | None = None,
    ) -> None:
        self.node = node
        self.externals = externals
        self.pages = pages
        self.inline = inline
        self.sidecars = sidecars
        self.budget = page_size_bytes
        self.thresholds = Thresholds.of(node.field)
        self.packed: tuple[int, IO[bytes]] | None = None
        self.packed_size = 0
        self.pending: list[tuple[np.ndarray, np.ndarray, list[bytes] | None]] = []
        self.pending_rows = 0
        self.rows_written = 0

    def append(self, arr: pa.Array) -> None:
        """Store the blobs of ``arr`` (the field's logical struct) and buffer their descriptors."""
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        n = len(arr)
        if not n:
            return
        valid = np.ones(n, bool) if not arr.null_count else np.asarray(arr.is_valid())
        data = arr.field("data")
        names = [f.name for f in arr.type]
        if "kind" in names:  # pylance's descriptor column: blobs already stored
            self._queue(*self._described(arr, valid), valid)
            return
        external = np.zeros(n, bool)
        if "uri" in names:
            external = np.asarray(arr.field("uri").is_valid()) & valid
            if external.any() and self.externals is None:
                row = int(np.flatnonzero(external)[0])
                raise UnsupportedFormatError(
                    f"field {self.node.name!r}: row {row} is an external blob "
                    f"({arr.field('uri')[row].as_py()!r}); only write_dataset writes external blob URIs"
                )
        has_data = np.asarray(data.is_valid()) if data.null_count else np.ones(n, bool)
        missing = valid & ~has_data & ~external
        if missing.any():
            raise SchemaError(
                f"field {self.node.name!r}: row {int(np.flatnonzero(missing)[0])} sets neither data nor uri "
                "(use a null row for a null blob)"
            )
        offsets = np.frombuffer(data.buffers()[1], np.int64, n + 1, data.offset * 8)
        body = data.buffers()[2]
        fixed = np.zeros(int(valid.sum()), _FIXED)
        refs = _external_refs(arr, external, names) if external.any() else None
        uris: list[bytes] | None = [] if refs is not None else None
        for k, i in enumerate(np.flatnonzero(valid).tolist()):
            if refs is not None and uris is not None:
                ref = refs.get(i)
                if ref is not None:
                    assert self.externals is not None
                    blob_id, stored = self.externals(ref[0])
                    uri = stored.encode()
                    fixed[k] = (BlobKind.EXTERNAL, ref[1], ref[2], blob_id, len(uri))
                    uris.append(uri)
                    continue
                uris.append(b"")
            start, size = int(offsets[i]), int(offsets[i + 1] - offsets[i])
            blob = body.slice(start, size) if size else b""
            fixed[k] = self._store(blob, size)
        self._queue(fixed, uris, valid)

    def _queue(self, fixed: np.ndarray, uris: list[bytes] | None, valid: np.ndarray) -> None:
        self.pending.append((fixed, valid, uris))
        self.pending_rows += int(valid.size)
        if (self.pending_rows * _FIXED.itemsize) >= self.budget:
            self._flush()

    def _described(self, arr: pa.StructArray, valid: np.ndarray) -> tuple[np.ndarray, list[bytes] | None]:
        """The descriptors of a descriptor column (``lance_table.blob_descriptors``): inline
        values written into the data file, the others stored as they say.

        Raises:
            SchemaError: a row's kind is unknown, or it lacks a value its kind needs.
        """
        rows = np.flatnonzero(valid)
        picked = pa.array(rows, pa.int64())
        cols = {f.name: arr.field(f.name).take(picked) for f in arr.type}
        kinds = cols["kind"].fill_null(255).to_numpy(zero_copy_only=False)
        fixed = np.zeros(rows.size, _FIXED)
        fixed["kind"] = kinds
        for name, target in (("position", "position"), ("blob_size", "size"), ("blob_id", "blob_id")):
            if name in cols:
                fixed[target] = cols[name].fill_null(0).to_numpy(zero_copy_only=False)
        known = np.isin(kinds, [int(k) for k in DescriptorKind])
        if not known.all():
            bad = int(rows[np.flatnonzero(~known)[0]])
            raise SchemaError(f"field {self.node.name!r}: row {bad} has no known blob descriptor kind")
        inline = np.flatnonzero(kinds == DescriptorKind.INLINE)
        data = cols["data"]
        for k in inline.tolist():
            value = data[k]
            if not value.is_valid:
                raise SchemaError(f"field {self.node.name!r}: row {int(rows[k])} is inline without data")
            blob = value.as_buffer() or b""
            fixed[k] = (BlobKind.INLINE, self.inline(blob), len(blob), 0, 0)
        dedicated = kinds == DescriptorKind.DEDICATED
        fixed["position"][dedicated] = 0
        managed = np.isin(kinds, [DescriptorKind.MANAGED, DescriptorKind.MANAGED_BASE])
        fixed["blob_id"][kinds == DescriptorKind.MANAGED] = 0
        if not managed.any():
            return fixed, None
        uris = [b""] * rows.size
        given = cols["uri"]
        for k in np.flatnonzero(managed).tolist():
            uri = given[k].as_py()
            if not uri:
                raise SchemaError(
                    f"field {self.node.name!r}: row {int(rows[k])} is a managed blob without a uri"
                )
            uris[k] = check_managed_uri(uri).encode()
            fixed["uri"][k] = len(uris[k])
        return fixed, uris

    def _store(self, blob: Any, size: int) -> tuple[int, int, int, int, int]:
        """Write one blob where its size says; its descriptor record."""
        t = self.thresholds
        if size > t.dedicated:
            blob_id, stream = self.sidecars.open(self.node.name)
            stream.write(blob)
            self.sidecars.close_one(blob_id)
            return (BlobKind.DEDICATED, 0, size, blob_id, 0)
        if size <= t.inline:
            return (BlobKind.INLINE, self.inline(blob), size, 0, 0)
        if self.packed is None or self.packed_size + size > t.pack_file:
            if self.packed is not None:
                self.sidecars.close_one(self.packed[0])
            self.packed = self.sidecars.open(self.node.name)
            self.packed_size = 0
        blob_id, stream = self.packed
        stream.write(blob)
        position = self.packed_size
        self.packed_size += size
        return (BlobKind.PACKED, position, size, blob_id, 0)

    def _flush(self) -> None:
        if not self.pending:
            return
        fixed = np.concatenate([f for f, _, _ in self.pending])
        valid = np.concatenate([v for _, v, _ in self.pending])
        uris = None
        if any(u is not None for _, _, u in self.pending):
            uris = [uri for f, _, u in self.pending for uri in (u if u is not None else [b""] * len(f))]
        layout, buffers = encode_descriptor_page(fixed, uris, valid)
        self.pages(layout, buffers, int(valid.size), self.rows_written)
        self.rows_written += int(valid.size)
        self.pending, self.pending_rows = [], 0

    def finish(self) -> None:
        """Write the last descriptor page; the packed sidecar is finished with the file's others."""
        self._flush()
