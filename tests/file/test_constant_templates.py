"""A field stored as a constant page of one inline value per file (a load id, a batch number: the
same in every row of an append, another in the next) is described once: the files whose column
metadata is the first's but for the value get its layout with their own value, without their
metadata parsed again; files of other metadata, and bytes where the value's place is not
certain, are described the general way. Rows as pylance reads them."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import any_pb2

import lance_table as lt
from lance_table._proto import encodings_v2_1_pb2, file2_pb2
from lance_table.file.container import URL_PAGE_LAYOUT
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import small_constant, small_layouts
from lance_table.table.session import clear_caches


def _blob(value: bytes, column_encoding: bytes = b"", length: int = 100) -> bytes:
    page = encodings_v2_1_pb2.PageLayout()
    page.constant_layout.inline_value = value
    page.constant_layout.layers.append(encodings_v2_1_pb2.RepDefLayer.REPDEF_ALL_VALID_ITEM)
    wrapped = any_pb2.Any(type_url=URL_PAGE_LAYOUT, value=page.SerializeToString())
    col = file2_pb2.ColumnMetadata()
    col.encoding.direct.encoding = column_encoding
    p = col.pages.add(length=length)
    p.encoding.direct.encoding = wrapped.SerializeToString()
    return col.SerializeToString()


def _layout(value: bytes) -> small_constant.ConstantLayout:
    return small_constant.ConstantLayout(("k",), (0,), value)


def test_the_value_is_found_where_the_metadata_holds_it() -> None:
    value = (7).to_bytes(8, "little")
    # the same bytes earlier in the metadata (the column's own encoding): not the value's place
    blob = _blob(value, column_encoding=b"xx" + value + b"yy")
    found = small_constant.template(blob, _layout(value))
    assert found is not None and blob[found.at : found.at + 8] == value
    assert found.at > blob.find(value)
    other = (123456789).to_bytes(8, "little")
    got = small_constant.like(found, _blob(other, column_encoding=b"xx" + value + b"yy"))
    assert got is not None and got.value == other and got.key == ("k",)


def test_metadata_other_than_the_value_gets_no_layout() -> None:
    value = (7).to_bytes(8, "little")
    found = small_constant.template(_blob(value), _layout(value))
    assert found is not None
    assert small_constant.like(found, _blob(value, length=101)) is None  # another page length
    assert small_constant.like(found, _blob(b"\x01" * 4)) is None  # another size
    assert small_constant.like(found, _blob(value, column_encoding=b"z")) is None
    # a layout that is not the metadata's, or a value it does not hold: no template
    assert small_constant.template(_blob(value), _layout(b"\x08" * 8)) is None
    assert small_constant.template(b"\xff\xff", _layout(value)) is None


@pytest.fixture(params=["2.2", "2.1"])
def loads(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Appends of pylance, each with its own load id (a constant page of it) and file size."""
    uri = str(tmp_path / "ds")
    for i in range(10):
        n = 50 + 10 * (i % 3)
        rows = pa.table(
            {
                "id": np.arange(100 * i, 100 * i + n, dtype=np.int64),
                "load": pa.array([i * 1000 + 1] * n, pa.int64()),
                "batch": pa.array([float(i)] * n, pa.float64()),
            }
        )
        lance.write_dataset(rows, uri, mode="append" if i else "create", data_storage_version=request.param)
    return uri


def test_a_constant_of_each_append_is_described_once(loads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clear_caches()
    made: list[str] = []
    column = small_layouts._column

    def counted(reader: LanceFileReader, node: object, *args: object) -> object:
        made.append(node.name)  # type: ignore[attr-defined]
        return column(reader, node, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(small_layouts, "_column", counted)
    readers = [LanceFileReader(str(f)) for f in sorted((Path(loads) / "data").iterdir())]
    layouts = [small_layouts.layout(r, ["load", "batch"]) for r in readers]
    assert all(lay is not None for lay in layouts)
    constant = isinstance(layouts[0].columns[0], small_constant.ConstantLayout)  # type: ignore[union-attr]
    if constant:  # pylance 2.2: three row counts, so three descriptions of each field at most
        assert made.count("load") <= 3 and made.count("batch") <= 3
    theirs = lance.dataset(loads)
    n = theirs.count_rows()
    picks = np.random.default_rng(0).choice(n, 25, replace=False).tolist()
    for _ in range(2):
        clear_caches()
        ours = lt.dataset(loads)
        assert ours.take(picks).equals(theirs.take(picks))
        assert ours.to_table().equals(theirs.to_table())
        assert ours.to_table(filter="load > 4000").equals(theirs.to_table(filter="load > 4000"))
