"""pylance's ``lance.arrow``: the ``lance.bfloat16`` extension type (its array, scalar, value and
pandas dtype), ``bfloat16_array`` and ``cast`` between floats and bfloat16; the image types come
from :mod:`lance_table.arrow_images`.

A bfloat16 value is the upper half of a float32 (rounded to nearest, ties to even); the type
stores it as 2 little-endian bytes (``fixed_size_binary[2]``) under the extension name
``lance.bfloat16``, as pylance does, so either library reads what the other writes.

These types are not put into pyarrow's global registry: pylance registers its own under the same
name when it is imported, and a second registration would make that import fail. Reading a
dataset gives pylance's type when pylance is loaded and this module's otherwise (see
:func:`lance_table.extensions.user_field`). ``ml_dtypes`` is needed only for ``to_numpy`` and
``from_numpy`` (as in pylance); pandas only for the pandas dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.arrow_images import (
    EncodedImageArray,
    EncodedImageType,
    FixedShapeImageTensorArray,
    FixedShapeImageTensorType,
    ImageArray,
    ImageScalar,
    ImageURIArray,
    ImageURIType,
)

BFLOAT16_NAME = "lance.bfloat16"

__all__ = [
    "BFloat16",
    "BFloat16Array",
    "BFloat16Type",
    "EncodedImageArray",
    "EncodedImageType",
    "FixedShapeImageTensorArray",
    "FixedShapeImageTensorType",
    "ImageArray",
    "ImageScalar",
    "ImageURIArray",
    "ImageURIType",
    "bfloat16_array",
    "cast",
]


def _to_bits(values: np.ndarray) -> np.ndarray:
    """float values -> bfloat16 bit patterns (uint16), rounded to nearest, ties to even."""
    with np.errstate(over="ignore"):  # beyond float32's range is infinity, as in pylance
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():  # a NaN stays a (quiet) NaN, with its sign
        rounded[nan] = ((bits[nan] >> 16).astype(np.uint16) & 0x8000) | 0x7FC0
    return rounded


def _from_bits(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _shortest(value: np.float32) -> str:
    """The shortest decimal that reads back as this float32, positional, as pylance prints it (when
    two shortest candidates are equally near, pylance's choice may differ in the last digit)."""
    if np.isnan(value):
        return "NaN"
    text: str = np.format_float_positional(value, unique=True, trim="-")
    return text


@functools.total_ordering
class BFloat16:
    """One bfloat16 value (pylance's ``lance.arrow.BFloat16``): made from a float, compared with
    other ``BFloat16`` values, printed as its shortest decimal (``BFloat16(1.124565)`` prints
    ``1.125``).

    Raises:
        TypeError: (on construction) the value is not a real number.
    """

    __slots__ = ("_bits",)
    __hash__ = None  # type: ignore[assignment]  # unhashable, as pylance's

    def __init__(self, value: float) -> None:
        if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"argument 'value': must be real number, not {type(value).__name__}")
        self._bits = int(_to_bits(np.array([value], np.float64))[0])

    @classmethod
    def from_bytes(cls, bytes: bytes) -> BFloat16:  # (pylance's keyword)
        """The value stored in 2 little-endian bytes.

        Raises:
            ValueError: ``bytes`` is not 2 bytes long.
        """
        if len(bytes) != 2:
            raise ValueError(f"a bfloat16 is 2 bytes, got {len(bytes)}")
        out = cls.__new__(cls)
        out._bits = int.from_bytes(bytes, "little")
        return out

    def as_float(self) -> float:
        return float(_from_bits(np.array([self._bits]))[0])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloat16) and self.as_float() == other.as_float()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BFloat16):
            return NotImplemented
        return self.as_float() < other.as_float()

    def __str__(self) -> str:
        return _shortest(_from_bits(np.array([self._bits]))[0])

    __repr__ = __str__


class BFloat16Type(pa.ExtensionType):
    """The ``lance.bfloat16`` extension type: 2-byte values (``fixed_size_binary[2]``)."""

    def __init__(self) -> None:
        super().__init__(pa.binary(2), BFLOAT16_NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> BFloat16Type:
        return BFloat16Type()

    def __arrow_ext_class__(self) -> type:
        return BFloat16Array

    def __arrow_ext_scalar_class__(self) -> type:
        return BFloat16Scalar

    def to_pandas_dtype(self) -> Any:
        """The pandas dtype ``lance.bfloat16`` (needs pandas)."""
        return _pandas_classes()[0]()

    def __reduce__(self) -> tuple[Any, ...]:
        return BFloat16Type, ()


class BFloat16Array(pa.ExtensionArray):
    """An array of ``lance.bfloat16`` values."""

    def __repr__(self) -> str:
        return f"<lance.arrow.BFloat16Array object at 0x{id(self):016x}>\n{self}"

    def __str__(self) -> str:
        shown = [f"  {v}" for v in self] if len(self) < 22 else None
        if shown is None:
            head = [f"  {v}" for v in self[:10]]
            tail = [f"  {v}" for v in self[-10:]]
            return "[\n" + ",\n".join(head) + ",\n...\n" + ",\n".join(tail) + "\n]"
        return "[\n" + ",\n".join(shown) + "\n]"

    def to_numpy(self, zero_copy_only: bool = False) -> np.ndarray:
        """The values as an ``ml_dtypes.bfloat16`` NumPy array (needs ``ml_dtypes``).

        Raises:
            ValueError: the array has nulls.
            ImportError: ``ml_dtypes`` is not installed.
        """
        if self.null_count:
            raise ValueError("Cannot convert null values to numpy")
        from ml_dtypes import bfloat16

        return _bits_of(self).view(bfloat16)

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> BFloat16Array:
        """An array of the values of a one-dimensional ``ml_dtypes.bfloat16`` NumPy array.

        Raises:
            ValueError: the array is not of dtype bfloat16, or not one-dimensional.
        """
        if array.dtype.name != "bfloat16":
            raise ValueError("Cannot convert non-bfloat16 values to BFloat16Array")
        if array.ndim != 1:
            raise ValueError("Cannot convert multi-dimensional array to BFloat16Array")
        return _from_bits_array(np.ascontiguousarray(array).view(np.uint16), None)


class BFloat16Scalar(pa.ExtensionScalar):
    """One value of a :class:`BFloat16Array`; ``as_py()`` gives a :class:`BFloat16` (or None)."""

    def as_py(self, **kwargs: Any) -> BFloat16 | None:
        if self.value is None:
            return None
        return BFloat16.from_bytes(self.value.as_py())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BFloat16Scalar):
            return self.as_py() == other.as_py()
        if isinstance(other, BFloat16):
            return self.as_py() == other
        if type(other).__name__ == "bfloat16":  # an ml_dtypes scalar
            return self.as_py() == BFloat16.from_bytes(other.tobytes())  # type: ignore[attr-defined]
        return False

    __hash__ = None  # type: ignore[assignment]


def _bits_of(arr: pa.Array) -> np.ndarray:
    """The uint16 bit patterns of a bfloat16 array (``fixed_size_binary[2]`` storage or extension)."""
    storage = arr.storage if isinstance(arr, pa.ExtensionArray) else arr
    data = storage.buffers()[1]
    bits = np.frombuffer(data, dtype="<u2") if data is not None else np.zeros(0, np.uint16)
    return bits[storage.offset : storage.offset + len(storage)]


def _from_bits_array(bits: np.ndarray, mask: np.ndarray | None) -> BFloat16Array:
    data = pa.py_buffer(np.ascontiguousarray(bits, dtype="<u2").tobytes())
    validity = None
    if mask is not None and mask.any():
        validity = pa.array(~mask).buffers()[1]
    storage = pa.Array.from_buffers(pa.binary(2), len(bits), [validity, data])
    return pa.ExtensionArray.from_storage(BFloat16Type(), storage)


def bfloat16_array(values: Iterable[float | None]) -> BFloat16Array:
    """A :class:`BFloat16Array` of the values (None is null).

    Raises:
        TypeError: a value is not a real number.
    """
    items = list(values)
    mask = np.array([v is None for v in items], dtype=bool)
    for v in items:
        if v is not None and (isinstance(v, (str, bytes)) or not isinstance(v, (int, float, np.number))):
            raise TypeError(f"argument 'values': must be real number, not {type(v).__name__}")
    floats = np.array([0.0 if v is None else v for v in items], dtype=np.float64)
    return _from_bits_array(_to_bits(floats), mask)


def _is_bfloat16(t: Any) -> bool:
    return isinstance(t, pa.BaseExtensionType) and t.extension_name == BFLOAT16_NAME


def cast(arr: pa.Array, target_type: pa.DataType | str, *args: Any, **kwargs: Any) -> pa.Array:
    """``pyarrow.compute.cast`` that also casts between float arrays (``float16``, ``float32``,
    ``float64``) and bfloat16 arrays (``"bfloat16"``, ``"bf16"`` or :class:`BFloat16Type`), and
    between fixed-size lists of them of one size. Nulls stay nulls.

    Raises:
        ValueError: a bfloat16 array to a non-float type, a non-float array to bfloat16, or
            fixed-size lists of different sizes.
    """
    to_bf16 = _is_bfloat16(target_type) or (
        isinstance(target_type, str) and target_type in ("bfloat16", "bf16")
    )
    if _is_bfloat16(arr.type):
        if not isinstance(target_type, pa.DataType) or not pa.types.is_floating(target_type):
            raise ValueError(f"Only support casting bfloat16 array to floating array, got: {target_type}")
        values = pa.array(_from_bits(_bits_of(arr)), mask=arr.is_null().to_numpy(zero_copy_only=False))
        return values.cast(target_type)
    if to_bf16:
        if not pa.types.is_floating(arr.type):
            raise ValueError(f"Only support casting floating array to bfloat16 array, got: {arr.type}")
        floats = arr.cast(pa.float32()).fill_null(0).to_numpy(zero_copy_only=False)
        nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
        return _from_bits_array(_to_bits(floats), nulls)
    if (
        isinstance(target_type, pa.DataType)
        and pa.types.is_fixed_size_list(arr.type)
        and pa.types.is_fixed_size_list(target_type)
    ):
        if arr.type.list_size != target_type.list_size:
            raise ValueError(
                "Only support casting fixed size list to fixed size list "
                f"with the same size, got: {arr.type} to {target_type}"
            )
        n = arr.type.list_size
        flat = arr.values.slice(arr.offset * n, len(arr) * n)
        values = cast(flat, target_type.value_type)
        mask = arr.is_null() if arr.null_count else None
        return pa.FixedSizeListArray.from_arrays(values, n, mask=mask)
    return pc.cast(arr, target_type, *args, **kwargs)


@functools.cache
def _pandas_classes() -> tuple[type, type]:
    """pandas' ``lance.bfloat16`` dtype and its array class, made (and registered with pandas)
    on first use, so that importing lance_table does not import pandas."""
    from pandas.api.extensions import ExtensionArray, ExtensionDtype, register_extension_dtype

    class PandasBFloat16Type(ExtensionDtype):
        kind = "f"
        na_value = None
        name = BFLOAT16_NAME
        names = None
        type = BFloat16
        _is_numeric = True

        def __from_arrow__(self, array: pa.Array | pa.ChunkedArray) -> Any:
            if isinstance(array, pa.ChunkedArray):
                array = array.combine_chunks() if array.num_chunks else bfloat16_array([])
            return PandasBFloat16Array(array)

        @classmethod
        def construct_array_type(cls) -> Any:
            return PandasBFloat16Array

        @classmethod
        def construct_from_string(cls, string: str) -> Any:
            if string == BFLOAT16_NAME:
                return cls()
            raise TypeError(f"Cannot construct a '{cls.__name__}' from '{string}'")

    class PandasBFloat16Array(ExtensionArray):
        dtype = PandasBFloat16Type()

        def __init__(self, data: pa.Array) -> None:
            self.data = data

        @classmethod
        def _from_sequence(cls, scalars: Any, *, dtype: Any = None, copy: bool = False) -> Any:
            if isinstance(scalars, PandasBFloat16Array):
                return cls(scalars.data)
            return cls(
                bfloat16_array(
                    None if s is None else s.as_float() if isinstance(s, BFloat16) else s for s in scalars
                )
            )

        @classmethod
        def _from_factorized(cls, values: Any, original: Any) -> Any:
            return cls._from_sequence(values)

        def __getitem__(self, item: Any) -> Any:
            if isinstance(item, (int, np.integer)):
                return self.data[int(item)].as_py()
            if isinstance(item, slice):
                return PandasBFloat16Array(self.data[item])
            index = np.asarray(item)
            if index.dtype == bool:
                return PandasBFloat16Array(self.data.filter(pa.array(index)))
            return PandasBFloat16Array(self.data.take(pa.array(index)))

        def __len__(self) -> int:
            return len(self.data)

        def isna(self) -> np.ndarray:
            return self.data.is_null().to_numpy(zero_copy_only=False)

        def take(self, indices: Any, allow_fill: bool = False, fill_value: Any = None) -> Any:
            index = np.asarray(indices, dtype=np.int64)
            if allow_fill:
                mask = index < 0
                taken = self.data.take(pa.array(np.where(mask, 0, index), mask=mask))
                return PandasBFloat16Array(taken)
            return PandasBFloat16Array(self.data.take(pa.array(index % max(len(self), 1))))

        def copy(self) -> Any:
            return PandasBFloat16Array(self.data)

        @property
        def nbytes(self) -> int:
            return int(self.data.nbytes)

        @classmethod
        def _concat_same_type(cls, to_concat: Any) -> Any:
            return cls(pa.concat_arrays([a.data for a in to_concat]))

        def to_numpy(self, *args: Any, **kwargs: Any) -> np.ndarray:
            return self.data.to_numpy()

        def __arrow_array__(self, type: Any = None) -> pa.Array:
            return self.data

        @classmethod
        def from_numpy(cls, array: np.ndarray) -> Any:
            return cls(BFloat16Array.from_numpy(array))

    register_extension_dtype(PandasBFloat16Type)
    return PandasBFloat16Type, PandasBFloat16Array


def __getattr__(name: str) -> Any:
    if name == "PandasBFloat16Array":
        return _pandas_classes()[1]
    if name == "PandasBFloat16Type":
        return _pandas_classes()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
