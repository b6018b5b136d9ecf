"""pylance's image extension types (``lance_table.arrow``): arrays made and read as pylance makes
them, pickled, and image columns written by either library and read by the other."""

from __future__ import annotations

import pickle
from pathlib import Path

import lance
import lance.arrow as pylance_arrow
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table import arrow as lt_arrow

pytestmark = pytest.mark.interop

_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63d0d2d2fa0f00026601a0bba1b2a60000000049454e44ae426082"
)


@pytest.fixture()
def uris(tmp_path: Path) -> list[str]:
    out = []
    for i in range(3):
        path = tmp_path / f"{i}.png"
        path.write_bytes(_PNG + bytes([i]))
        out.append(f"file://{path}")
    return out


def test_arrays_as_pylance_makes_them(uris: list[str]) -> None:
    ours = lt_arrow.ImageURIArray.from_uris(uris)
    theirs = pylance_arrow.ImageURIArray.from_uris(uris)
    assert ours.storage.equals(theirs.storage) and ours.type.extension_name == theirs.type.extension_name
    large = lt_arrow.ImageURIArray.from_uris(pa.array(uris, pa.large_string()))
    assert large.to_pylist() == uris
    encoded = ours.read_uris()
    assert encoded.storage.equals(theirs.read_uris().storage)
    assert encoded.to_pylist() == [_PNG + bytes([i]) for i in range(3)]
    assert isinstance(lt_arrow.ImageArray.from_array(encoded.storage), lt_arrow.EncodedImageArray)
    assert isinstance(lt_arrow.ImageArray.from_array(uris), lt_arrow.ImageURIArray)
    assert lt_arrow.ImageArray.from_array(ours) is ours
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(24, dtype=np.uint8).reshape(3, 2, 1, 4))
    images = lt_arrow.ImageArray.from_array(tensors)
    assert isinstance(images, lt_arrow.FixedShapeImageTensorArray) and images.type.shape == [2, 1, 4]
    np.testing.assert_array_equal(images.to_numpy(), np.arange(24, dtype=np.uint8).reshape(3, 2, 1, 4))
    for arr in (ours, encoded, images):
        assert pickle.loads(pickle.dumps(arr)) == arr
    with pytest.raises(TypeError):
        lt_arrow.ImageArray.from_array(3)
    with pytest.raises(ValueError):
        lt_arrow.ImageURIType(pa.int8())
    encode = lambda images: pa.array([b"x" * int(i.sum() % 7) for i in images], pa.binary())  # noqa: E731
    assert images.to_encoded(encode).to_pylist() == [b"x" * int(i.sum() % 7) for i in images.to_numpy()]


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_image_columns_cross_between_the_libraries(tmp_path: Path, uris: list[str], writer: str) -> None:
    mod = lt_arrow if writer == "ours" else pylance_arrow
    uri_array = mod.ImageURIArray.from_uris(uris)
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(24, dtype=np.uint8).reshape(3, 2, 1, 4))
    table = pa.table(
        {
            "uri": uri_array,
            "encoded": uri_array.read_uris(),
            "tensor": pa.ExtensionArray.from_storage(
                mod.FixedShapeImageTensorType(pa.uint8(), [2, 1, 4]), tensors.storage
            ),
        }
    )
    (lt if writer == "ours" else lance).write_dataset(table, tmp_path / "ds")
    ours, theirs = lt.dataset(tmp_path / "ds").to_table(), lance.dataset(tmp_path / "ds").to_table()
    assert ours.to_pylist() == theirs.to_pylist() == table.to_pylist()
    assert [f.type.extension_name for f in ours.schema] == [f.type.extension_name for f in theirs.schema]
    assert [str(f.type) for f in ours.schema] == [str(f.type) for f in table.schema]
