"""pylance's blob v2 descriptors for blobs written before the data file: :class:`BlobDescriptor`
(what a packed or dedicated sidecar writer returns for each blob) and
:class:`BlobDescriptorArrayBuilder`, which builds the column a 2.2 data file's writer takes for a
blob v2 field whose bytes are already stored.

The column is a struct of ``kind: uint8, data: large_binary, uri: string, blob_id: uint32,
blob_size: uint64, position: uint64`` (all nullable; a null row is a null blob) on a field tagged
``ARROW:extension:name = lance.blob.v2``, as pylance builds it. Kinds:

===  =========================================================================================
0    inline: ``data`` is the blob, written into the data file
1    packed: ``blob_size`` bytes at ``position`` of sidecar ``blob_id`` of the data file
2    dedicated: the whole sidecar ``blob_id`` of the data file (``blob_size`` bytes)
4    managed: ``blob_size`` bytes at ``position`` of ``uri``, relative to the dataset's root
5    managed in a base path: as 4, ``uri`` relative to the registered base path ``blob_id``
===  =========================================================================================

Sidecars live in ``<data file path without .lance>/<name>.blob`` (see
``lance_table.file.blob_writers``); the data file must then be written at that path.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

__all__ = [
    "DESCRIPTOR_ARRAY_TYPE",
    "BlobDescriptor",
    "BlobDescriptorArrayBuilder",
    "DescriptorKind",
    "check_managed_uri",
]

#: The type of a descriptor column (pylance's ``BlobDescriptorArrayBuilder.field``).
DESCRIPTOR_ARRAY_TYPE = pa.struct(
    [
        pa.field("kind", pa.uint8()),
        pa.field("data", pa.large_binary()),
        pa.field("uri", pa.utf8()),
        pa.field("blob_id", pa.uint32()),
        pa.field("blob_size", pa.uint64()),
        pa.field("position", pa.uint64()),
    ]
)
_EXTENSION = {b"ARROW:extension:name": b"lance.blob.v2"}
_U32 = 1 << 32


class DescriptorKind(enum.IntEnum):
    """The ``kind`` of a descriptor column's row (see the module)."""

    INLINE = 0
    PACKED = 1
    DEDICATED = 2
    MANAGED = 4
    MANAGED_BASE = 5


@dataclass(frozen=True)
class BlobDescriptor:
    """Where one blob written by a sidecar writer is (pylance's ``BlobDescriptor``): ``kind``
    packed (``offset`` and ``size`` in sidecar ``blob_id``) or dedicated (the whole sidecar), or
    None for a null value of ``PackedBlobWriter.write_blobs``.

    Example:
        ```python
        from lance_table.blob_descriptors import BlobDescriptor, DescriptorKind

        d = BlobDescriptor(DescriptorKind.PACKED, blob_id=1, offset=5, size=2)
        assert repr(d) == "Packed { blob_id: 1, offset: 5, size: 2 }"
        ```
    """

    kind: DescriptorKind | None
    blob_id: int = 0
    offset: int = 0
    size: int = 0

    def __repr__(self) -> str:
        if self.kind == DescriptorKind.PACKED:
            return f"Packed {{ blob_id: {self.blob_id}, offset: {self.offset}, size: {self.size} }}"
        if self.kind == DescriptorKind.DEDICATED:
            return f"Dedicated {{ blob_id: {self.blob_id}, size: {self.size} }}"
        return "Null"


def _u32(name: str, value: int) -> int:
    if not 0 <= int(value) < _U32:
        raise OverflowError(f"{name} {value} is not a 32-bit unsigned integer")
    return int(value)


def _u64(name: str, value: int) -> int:
    if not 0 <= int(value) < 1 << 64:
        raise OverflowError(f"{name} {value} is not a 64-bit unsigned integer")
    return int(value)


def check_managed_uri(uri: str) -> str:
    """``uri`` if it is a canonical relative object path (``dir/name.bin``: no scheme, no leading
    or trailing ``/``, no empty, ``.`` or ``..`` segments, no backslash), as pylance requires.

    Raises:
        ValueError: it is not.

    Example:
        ```python
        from lance_table.blob_descriptors import check_managed_uri

        assert check_managed_uri("blobs/a.bin") == "blobs/a.bin"
        ```
    """
    parts = uri.split("/") if isinstance(uri, str) else [""]
    if "\\" in uri or ":" in parts[0] or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"Managed blob_uri must be a non-empty canonical relative object path, got {uri!r}")
    return uri


class BlobDescriptorArrayBuilder:
    """Builds a blob v2 column from blobs already written (pylance's
    ``BlobDescriptorArrayBuilder``): packed and dedicated sidecar blobs, managed objects under the
    dataset or a base path, inline bytes and nulls, one row per call (``extend*`` several).
    :meth:`finish` returns the column; a data file written at the sidecars' data file path with
    it (``LanceFileSession.open_writer``, format 2.2) and committed with a ``blob_field`` schema
    reads back as those blobs.

    Raises:
        ValueError: (on :meth:`finish` or any call after it) the builder is finished.

    Example:
        ```python
        b = lt.BlobDescriptorArrayBuilder("image")
        b.append_inline(b"tiny")
        b.append_null()
        b.extend_packed(1, offsets=[0, 5], sizes=[5, 2])  # sidecar 1 of the data file
        column = b.finish()
        assert len(column) == 4 and b.field.name == "image"
        ```
    """

    def __init__(self, column: str) -> None:
        self._field = pa.field(column, DESCRIPTOR_ARRAY_TYPE, metadata=_EXTENSION)
        self._rows: list[tuple[int, bytes | None, str | None, int | None, int | None, int | None] | None] = []
        self._finished = False

    @property
    def field(self) -> pa.Field:
        """The column's field (the descriptor struct, tagged ``lance.blob.v2``)."""
        return self._field

    def _add(
        self, row: tuple[int, bytes | None, str | None, int | None, int | None, int | None] | None
    ) -> None:
        if self._finished:
            raise ValueError("BlobDescriptorArrayBuilder is already finished")
        self._rows.append(row)

    def extend_packed(self, blob_id: int, offsets: Sequence[int], sizes: Sequence[int]) -> None:
        """Rows of packed blobs of sidecar ``blob_id``: ``sizes[i]`` bytes at ``offsets[i]``.

        Raises:
            ValueError: ``offsets`` and ``sizes`` differ in length.
            OverflowError: a value out of its integer range.
        """
        if len(offsets) != len(sizes):
            raise ValueError(
                f"offsets and sizes must have the same length, got {len(offsets)} and {len(sizes)}"
            )
        blob_id = _u32("blob_id", blob_id)
        for offset, size in zip(offsets, sizes):
            self._add(
                (DescriptorKind.PACKED, None, None, blob_id, _u64("size", size), _u64("offset", offset))
            )

    def append_dedicated(self, blob_id: int, size: int) -> None:
        """A row of the dedicated sidecar ``blob_id`` of ``size`` bytes."""
        self._add((DescriptorKind.DEDICATED, None, None, _u32("blob_id", blob_id), _u64("size", size), None))

    def append_managed(self, uri: str, offset: int, size: int, *, base_id: int | None = None) -> None:
        """A row of ``size`` bytes at ``offset`` of the object ``uri``, a relative path under the
        dataset's root, or under the registered base path ``base_id``.

        Raises:
            ValueError: ``uri`` is not a canonical relative object path.
        """
        check_managed_uri(uri)
        kind = DescriptorKind.MANAGED if base_id is None else DescriptorKind.MANAGED_BASE
        blob_id = None if base_id is None else _u32("base_id", base_id)
        self._add((kind, None, uri, blob_id, _u64("size", size), _u64("offset", offset)))

    def append(self, value: BlobDescriptor) -> None:
        """A row of a sidecar writer's descriptor (a null row for its null)."""
        if value.kind == DescriptorKind.PACKED:
            self.extend_packed(value.blob_id, [value.offset], [value.size])
        elif value.kind == DescriptorKind.DEDICATED:
            self.append_dedicated(value.blob_id, value.size)
        else:
            self.append_null()

    def extend(self, values: Iterable[BlobDescriptor]) -> None:
        """A row of each of a sidecar writer's descriptors."""
        for value in values:
            self.append(value)

    def append_inline(self, data: bytes) -> None:
        """A row whose bytes the data file's writer stores in the data file itself."""
        self._add((DescriptorKind.INLINE, bytes(data), None, None, None, None))

    def append_null(self) -> None:
        """A null row (a null blob)."""
        self._add(None)

    def finish(self) -> pa.StructArray:
        """The column (the builder is finished: no call may follow)."""
        if self._finished:
            raise ValueError("BlobDescriptorArrayBuilder is already finished")
        self._finished = True
        names = [f.name for f in DESCRIPTOR_ARRAY_TYPE]
        rows = [None if r is None else dict(zip(names, r)) for r in self._rows]
        self._rows = []
        return pa.array(rows, DESCRIPTOR_ARRAY_TYPE)
