"""Blob v2 values to write (pylance's ``lance.blob`` builders): :class:`Blob` (inline bytes or an
external URI, optionally a range of it), the ``lance.blob.v2`` Arrow extension type
:class:`BlobType` and its array :class:`BlobArray`, :func:`blob_array` and :func:`blob_field`
(a blob column's field, with its storage thresholds). A 2.2 dataset written with these columns
stores them as blob v2 descriptors and sidecars, as pylance does with its own builders: the
arrays are the same Arrow data.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa

from lance_table.errors import BlobOverflowError, BlobValueError, InputTypeError

__all__ = [
    "DEFAULT_BLOB_BUFFER_SIZE",
    "Blob",
    "BlobArray",
    "BlobIterator",
    "BlobType",
    "blob_array",
    "blob_field",
]

# pylance's default read-ahead of a BlobFile, in bytes (lance_table reads what is asked).
DEFAULT_BLOB_BUFFER_SIZE = 512 * 1024
EXTENSION_NAME = "lance.blob.v2"
# Field metadata keys of a blob column's storage thresholds, as pylance writes them.
INLINE_THRESHOLD_KEY = b"lance-encoding:blob-inline-size-threshold"
DEDICATED_THRESHOLD_KEY = b"lance-encoding:blob-dedicated-size-threshold"
PACK_FILE_THRESHOLD_KEY = b"lance-encoding:blob-pack-file-size-threshold"
_MAX_USIZE = 2**64 - 1
_CHILDREN = (
    pa.field("data", pa.large_binary()),
    pa.field("uri", pa.utf8()),
    pa.field("position", pa.uint64()),
    pa.field("size", pa.uint64()),
)


@dataclass(frozen=True)
class Blob:
    """One blob value to write: inline ``data``, or an external ``uri`` (optionally the range
    ``position``, ``size`` of it). Exactly one of ``data`` and ``uri`` is set; ``None`` (not a
    ``Blob``) is a null blob, :meth:`empty` a valid empty one.

    Raises:
        BlobValueError: both or neither of ``data`` and ``uri``; an empty URI; only one of
            ``position`` and ``size``; a range with inline data; a range of size zero (a
            ValueError, as pylance raises).

    Example:
        ```python
        from lance_table.blob import Blob

        print(Blob.from_bytes(b"abc").data, Blob.from_uri("s3://bucket/video.mp4", 10, 5).size)
        ```
    """

    data: bytes | None = None
    uri: str | None = None
    position: int | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if self.data is not None and self.uri is not None:
            raise BlobValueError("Blob cannot have both data and uri")
        if self.uri == "":
            raise BlobValueError("Blob uri cannot be empty")
        if (self.position is not None or self.size is not None) and self.uri is None:
            raise BlobValueError("External packed blob must have a uri")
        if (self.position is None) != (self.size is None):
            raise BlobValueError("External blob must set both position and size, or neither")
        if self.data is None and self.uri is None:
            raise BlobValueError("Blob must set `data` or `uri`; use None for a null blob")
        if self.size == 0:
            raise BlobValueError("External blob range size must be greater than zero")

    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> Blob:
        """An inline blob of ``data``."""
        return Blob(data=bytes(data))

    @staticmethod
    def from_uri(uri: str, position: int | None = None, size: int | None = None) -> Blob:
        """An external blob at ``uri`` (the range ``position``, ``size`` of it, if given).

        Raises:
            BlobValueError: an empty URI, a negative position or size, or only one of them.
        """
        if uri == "":
            raise BlobValueError("Blob uri cannot be empty")
        if (position is not None and position < 0) or (size is not None and size < 0):
            raise BlobValueError("External blob position and size must be non-negative")
        return Blob(uri=uri, position=position, size=size)

    @staticmethod
    def empty() -> Blob:
        """A valid blob of no bytes (not a null)."""
        return Blob(data=b"")


class BlobType(pa.ExtensionType):
    """The ``lance.blob.v2`` Arrow extension type of a blob column as written: storage
    ``struct<data: large_binary, uri: string, position: uint64, size: uint64>`` (or its first
    two children). pylance's ``BlobType`` is the same type: whichever library is imported first
    registers it with pyarrow.

    Raises:
        InputTypeError: (deserializing) a storage type that is not one of those structs (a
            TypeError, as pylance raises).

    Example:
        ```python
        import pyarrow as pa
        from lance_table.blob import BlobType

        print(pa.field("video", BlobType()).type.extension_name)
        ```
    """

    def __init__(self) -> None:
        pa.ExtensionType.__init__(self, pa.struct(list(_CHILDREN)), EXTENSION_NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        """No parameters: the empty string."""
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> BlobType:
        """The type over ``storage_type`` (4 children, or pylance's minimal ``data, uri``).

        Raises:
            InputTypeError: ``storage_type`` is not such a struct.
        """
        _check_storage(storage_type)
        instance = cls.__new__(cls)
        pa.ExtensionType.__init__(instance, storage_type, EXTENSION_NAME)
        return instance

    def __arrow_ext_class__(self) -> type[pa.ExtensionArray]:
        """Arrays of this type are :class:`BlobArray`."""
        return BlobArray

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self).__arrow_ext_deserialize__, (self.storage_type, b"")


def _check_storage(storage_type: pa.DataType) -> None:
    if not pa.types.is_struct(storage_type):
        raise InputTypeError("BlobType storage type must be a struct")
    fields = list(storage_type)
    if len(fields) not in (2, 4):
        raise InputTypeError("BlobType storage struct must contain either data/uri or data/uri/position/size")
    for i, (got, want) in enumerate(zip(fields, _CHILDREN)):
        if got.name != want.name or got.type != want.type:
            raise InputTypeError(
                f"BlobType storage field {i} must be {want.name}: {want.type}, got {got.name}: {got.type}"
            )
        if i < 2 and not got.nullable:
            raise InputTypeError(f"BlobType storage field {got.name} must be nullable")


# (pylance, or an earlier import, may have registered the same type: either class reads it)
with contextlib.suppress(pa.ArrowKeyError):
    pa.register_extension_type(BlobType())


class BlobArray(pa.ExtensionArray):
    """An Arrow array of blob values to write (pylance's ``BlobArray``); build one with
    :meth:`from_pylist` or :func:`blob_array`.

    Example:
        ```python
        from lance_table.blob import BlobArray

        print(len(BlobArray.from_pylist([b"abc", None])))
        ```
    """

    @classmethod
    def from_pylist(cls, values: Sequence[Any]) -> BlobArray:
        """One blob per value: bytes-like (inline), ``str`` (an external URI), :class:`Blob`, or
        None (a null blob).

        Raises:
            InputTypeError: a value of another type (a TypeError, as pylance raises).
            BlobValueError: an empty URI string.
        """
        rows: list[tuple[bytes | None, str | None, int | None, int | None] | None] = []
        for v in values:
            if v is None:
                rows.append(None)
            elif isinstance(v, Blob):
                rows.append((v.data, v.uri, v.position, v.size))
            elif isinstance(v, str):
                if v == "":
                    raise BlobValueError("Blob uri cannot be empty")
                rows.append((None, v, None, None))
            elif isinstance(v, (bytes, bytearray, memoryview)):
                rows.append((bytes(v), None, None, None))
            else:
                raise InputTypeError(
                    f"BlobArray values must be bytes-like, str (URI), Blob, or None; got {type(v)}"
                )
        columns = [
            pa.array([None if r is None else r[i] for r in rows], f.type) for i, f in enumerate(_CHILDREN)
        ]
        mask = pa.array([r is None for r in rows], pa.bool_())
        storage = pa.StructArray.from_arrays(columns, fields=list(_CHILDREN), mask=mask)
        # (the registered class: pylance's when it was imported first; the data is the same)
        return pa.ExtensionArray.from_storage(BlobType(), storage)


def blob_array(values: Sequence[Any]) -> BlobArray:
    """A blob array of ``values`` (see :meth:`BlobArray.from_pylist`), pylance's ``blob_array``.

    Raises:
        InputTypeError: a value is not bytes-like, a string, a ``Blob`` or None.
        BlobValueError: an empty URI string.

    Example:
        ```python
        from lance_table.blob import Blob, blob_array

        print(blob_array([b"inline", "s3://bucket/a.bin", Blob.empty(), None]).null_count)
        ```
    """
    return BlobArray.from_pylist(values)


def _threshold(name: str, value: int | None, *, allow_zero: bool) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputTypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        raise BlobValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}")
    if value > _MAX_USIZE:
        raise BlobOverflowError(f"{name} must fit in a Rust usize")
    return str(value).encode()


def blob_field(
    name: str,
    *,
    nullable: bool = True,
    inline_size_threshold: int | None = None,
    dedicated_size_threshold: int | None = None,
    pack_file_size_threshold: int | None = None,
) -> pa.Field:
    """The Arrow field of a blob column (pylance's ``blob_field``): of :class:`BlobType`, with
    the storage thresholds given as field metadata. ``inline_size_threshold``: the largest blob
    kept in the data file; ``dedicated_size_threshold``: the largest blob packed into a shared
    sidecar (larger ones get their own); ``pack_file_size_threshold``: the size at which a
    packed sidecar is closed.

    Raises:
        InputTypeError: a threshold is not an int.
        BlobValueError: a negative threshold, or a zero dedicated or pack file threshold.
        BlobOverflowError: a threshold above 2**64 - 1.

    Example:
        ```python
        from lance_table.blob import blob_field

        print(blob_field("video", inline_size_threshold=1024).metadata)
        ```
    """
    given = {
        INLINE_THRESHOLD_KEY: _threshold("inline_size_threshold", inline_size_threshold, allow_zero=True),
        DEDICATED_THRESHOLD_KEY: _threshold(
            "dedicated_size_threshold", dedicated_size_threshold, allow_zero=False
        ),
        PACK_FILE_THRESHOLD_KEY: _threshold(
            "pack_file_size_threshold", pack_file_size_threshold, allow_zero=False
        ),
    }
    field = pa.field(name, BlobType(), nullable=nullable)
    metadata = {k: v for k, v in given.items() if v is not None}
    return field.with_metadata(metadata) if metadata else field


class BlobIterator:
    """Iterates a binary column's values as file objects, None for a null (pylance's
    ``lance.blob.BlobIterator``, which :class:`~lance_table.blob.BlobColumn` uses).

    Example:
        ```python
        import pyarrow as pa
        from lance_table.blob import BlobIterator

        it = BlobIterator(iter(pa.array([b"ab"])))
        print(next(it).read())
        ```
    """

    def __init__(self, binary_iter: Iterator[pa.Scalar]) -> None:
        self.binary_iter = binary_iter

    def __iter__(self) -> BlobIterator:
        return self

    def __next__(self) -> IO[bytes] | None:
        """The next value as a file object (an empty file for a null scalar, as pylance's).

        Raises:
            StopIteration: no values are left.
        """
        value = next(self.binary_iter)
        if value is None:
            return None
        return io.BytesIO(value.as_py() or b"")
