"""pylance's image extension types in ``lance.arrow``: image URIs (``lance.arrow.image_uri``),
encoded images (``lance.arrow.encoded_image``) and decoded images as fixed-shape tensors
(``lance.arrow.fixed_shape_image_tensor``), with their arrays and scalars.

As with bfloat16 (:mod:`lance_table.arrow`), the types are not put into pyarrow's global registry
(pylance registers its own under these names); reading a dataset gives pylance's types when
pylance is loaded and these otherwise. Decoding and encoding images needs Pillow, or a function
given as ``decoder``/``encoder``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

IMAGE_URI = "lance.arrow.image_uri"
ENCODED_IMAGE = "lance.arrow.encoded_image"
IMAGE_TENSOR = "lance.arrow.fixed_shape_image_tensor"
_STRING = pa.string()
_BINARY = pa.binary()


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


class ImageURIType(pa.ExtensionType):
    """Image URIs (``string`` or ``large_string`` storage).

    Raises:
        ValueError: (on construction) the storage type is not a string type.
    """

    def __init__(self, storage_type: pa.DataType = _STRING) -> None:
        if not _is_string(storage_type):
            raise ValueError("storage_type must be a string type")
        super().__init__(storage_type, IMAGE_URI)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> ImageURIType:
        return ImageURIType(storage_type)

    def __arrow_ext_class__(self) -> type:
        return ImageURIArray

    def __arrow_ext_scalar_class__(self) -> type:
        return ImageURIScalar

    def __reduce__(self) -> tuple[Any, ...]:
        return ImageURIType, (self.storage_type,)


class EncodedImageType(pa.ExtensionType):
    """Encoded images, any format (``binary`` or ``large_binary`` storage).

    Raises:
        ValueError: (on construction) the storage type is not a binary type.
    """

    def __init__(self, storage_type: pa.DataType = _BINARY) -> None:
        if not _is_binary(storage_type):
            raise ValueError("storage_type must be a binary type")
        super().__init__(storage_type, ENCODED_IMAGE)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> EncodedImageType:
        return EncodedImageType(storage_type)

    def __arrow_ext_class__(self) -> type:
        return EncodedImageArray

    def __arrow_ext_scalar_class__(self) -> type:
        return EncodedImageScalar

    def __reduce__(self) -> tuple[Any, ...]:
        return EncodedImageType, (self.storage_type,)


class FixedShapeImageTensorType(pa.ExtensionType):
    """Decoded images of one ``shape`` (height, width, channels), stored as fixed-size lists."""

    def __init__(self, arrow_type: pa.DataType, shape: Sequence[int]) -> None:
        if len(shape) == 0:
            raise ValueError("an image tensor needs a shape")
        self.shape = list(shape)
        self.arrow_type = arrow_type
        super().__init__(pa.list_(arrow_type, int(np.prod(self.shape))), IMAGE_TENSOR)

    def __arrow_ext_serialize__(self) -> bytes:
        return json.dumps({"shape": self.shape}).encode()

    @classmethod
    def __arrow_ext_deserialize__(
        cls, storage_type: pa.DataType, serialized: bytes
    ) -> FixedShapeImageTensorType:
        return FixedShapeImageTensorType(storage_type.value_type, json.loads(serialized.decode())["shape"])

    def __arrow_ext_class__(self) -> type:
        return FixedShapeImageTensorArray

    def __arrow_ext_scalar_class__(self) -> type:
        return FixedShapeImageTensorScalar

    def __reduce__(self) -> tuple[Any, ...]:
        return FixedShapeImageTensorType, (self.arrow_type, self.shape)


class ImageArray(pa.ExtensionArray):
    """The image arrays' base: :meth:`from_array` makes the right one of its input."""

    def __repr__(self) -> str:
        return f"<lance.arrow.{type(self).__name__} object at 0x{id(self):016x}>\n{self.to_pylist()!r}"

    @classmethod
    def from_array(cls, images: Any) -> ImageArray:
        """Strings as :class:`ImageURIArray`, binaries as :class:`EncodedImageArray`, fixed-shape
        tensors as :class:`FixedShapeImageTensorArray`, an iterable of URIs as URIs.

        Raises:
            TypeError: the input is none of these.
        """
        if isinstance(images, ImageArray):
            return images
        if isinstance(images, pa.Array) and _is_string(images.type):
            return _wrap(ImageURIType(images.type), images)
        if isinstance(images, pa.Array) and _is_binary(images.type):
            return _wrap(EncodedImageType(images.type), images)
        if isinstance(images, pa.FixedShapeTensorArray):
            image_type = FixedShapeImageTensorType(images.type.value_type, images.type.shape)
            return _wrap(image_type, images.storage)
        if isinstance(images, Iterable) and not isinstance(images, (str, bytes, pa.Array)):
            return _wrap(ImageURIType(), pa.array([str(u) for u in images], pa.string()))
        raise TypeError(f"Cannot build a ImageArray from {type(images)}")


def _wrap(image_type: pa.ExtensionType, storage: pa.Array) -> Any:
    return pa.ExtensionArray.from_storage(image_type, storage)


class ImageURIArray(ImageArray):
    """Image URIs (local paths, ``file://``, object stores pyarrow opens, ``http(s)://``)."""

    @classmethod
    def from_uris(cls, uris: Any) -> ImageURIArray:
        """The URIs (a string array, or an iterable of strings or paths) as an array.

        Raises:
            TypeError: ``uris`` is not iterable.
        """
        if isinstance(uris, pa.Array) and _is_string(uris.type):
            storage = uris
        elif isinstance(uris, Iterable):
            storage = pa.array([str(u) for u in uris], pa.string())
        else:
            raise TypeError(f"Cannot build a ImageURIArray from {type(uris)}")
        return _wrap(ImageURIType(storage.type), storage)

    def read_uris(self, storage_type: pa.DataType = _BINARY) -> EncodedImageArray:
        """The bytes of each image (read through pyarrow's file systems; ``http(s)`` with urllib).

        Raises:
            OSError: an image cannot be read.
        """
        from urllib.parse import urlparse
        from urllib.request import urlopen

        from pyarrow import fs

        images: list[bytes | None] = []
        for uri in self.storage.to_pylist():
            if uri is None:
                images.append(None)
            elif urlparse(uri).scheme in ("http", "https"):
                with urlopen(uri) as response:
                    images.append(response.read())
            else:
                filesystem, path = fs.FileSystem.from_uri(uri)
                with filesystem.open_input_stream(path) as f:
                    images.append(f.read())
        return _wrap(EncodedImageType(storage_type), pa.array(images, storage_type))


def _pillow_decode(images: pa.Array) -> np.ndarray:
    from PIL import Image

    return np.stack([np.asarray(Image.open(io.BytesIO(b))) for b in images.to_pylist()])


class EncodedImageArray(ImageArray):
    """Encoded images (PNG, JPEG, ...)."""

    def to_tensor(self, decoder: Callable[[pa.Array], Any] | None = None) -> FixedShapeImageTensorArray:
        """The images decoded (by ``decoder``, else Pillow) into one fixed-shape tensor array.

        Raises:
            ValueError: no decoder given and Pillow is not installed.
        """
        if decoder is None:
            try:
                import PIL  # noqa: F401
            except ImportError:
                raise ValueError(
                    "No image decoder available. Please install pillow or pass a decoder argument."
                ) from None
            decoder = _pillow_decode
        decoded = decoder(self.storage)
        if isinstance(decoded, pa.FixedShapeTensorArray):
            shape, arrow_type, storage = decoded.type.shape, decoded.type.value_type, decoded.storage
        else:
            shape, arrow_type = decoded.shape[1:], pa.from_numpy_dtype(decoded.dtype)
            storage = pa.FixedShapeTensorArray.from_numpy_ndarray(decoded).storage
        return _wrap(FixedShapeImageTensorType(arrow_type, shape), storage)


def _pillow_encode(images: np.ndarray, storage_type: pa.DataType) -> pa.Array:
    from PIL import Image

    out = []
    for image in images:
        with io.BytesIO() as buf:
            Image.fromarray(image).save(buf, format="PNG")
            out.append(buf.getvalue())
    return pa.array(out, storage_type)


class FixedShapeImageTensorArray(ImageArray):
    """Decoded images of one shape."""

    def to_numpy(self, zero_copy_only: bool = True, writable: bool = False) -> np.ndarray:
        """The images as one array of shape (n, *shape)."""
        tensor_type = pa.fixed_shape_tensor(self.storage.type.value_type, self.type.shape)
        return pa.ExtensionArray.from_storage(tensor_type, self.storage).to_numpy_ndarray()

    def to_encoded(
        self, encoder: Callable[[np.ndarray], pa.Array] | None = None, storage_type: pa.DataType = _BINARY
    ) -> EncodedImageArray:
        """The images encoded (by ``encoder``, else as PNG with Pillow).

        Raises:
            ValueError: no encoder given and Pillow is not installed.
        """
        if encoder is None:
            try:
                import PIL  # noqa: F401
            except ImportError:
                raise ValueError(
                    "No image encoder available. Please install pillow or pass an encoder argument."
                ) from None
            encoded = _pillow_encode(self.to_numpy(), storage_type)
        else:
            encoded = encoder(self.to_numpy())
        return _wrap(EncodedImageType(storage_type), encoded)


class ImageScalar(pa.ExtensionScalar):
    """One image value; ``as_py()`` gives its storage value."""

    def as_py(self, **kwargs: Any) -> Any:
        return self.value.as_py(**kwargs) if self.value is not None else None


class ImageURIScalar(ImageScalar):
    pass


class EncodedImageScalar(ImageScalar):
    pass


class FixedShapeImageTensorScalar(ImageScalar):
    pass


def own_image_type(storage: pa.DataType, name: bytes, params: bytes) -> pa.DataType | None:
    """This module's type for an image extension nobody registered, or None."""
    try:
        if name == IMAGE_URI.encode() and _is_string(storage):
            return ImageURIType(storage)
        if name == ENCODED_IMAGE.encode() and _is_binary(storage):
            return EncodedImageType(storage)
        if name == IMAGE_TENSOR.encode() and pa.types.is_fixed_size_list(storage):
            return FixedShapeImageTensorType.__arrow_ext_deserialize__(storage, params)
    except (ValueError, KeyError, TypeError):
        return None
    return None
