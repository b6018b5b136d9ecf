"""Pages of many files are decoded together only when they decode alike: their interned keys
say everything the batch decoder reads from the first page's layout."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import small_layouts


def test_run_length_pages_of_one_or_two_buffers_get_different_keys(tmp_path: Path) -> None:
    # pylance writes run values and run lengths apart (two buffers per chunk); one block of both
    # (one buffer) has the same compression message but another chunk header: a file of each in
    # one batch must not be decoded with the other's header
    runs = np.repeat(np.arange(30, dtype=np.int64) % 3, 100)
    lance.write_dataset(pa.table({"x": runs}), tmp_path / "ds", data_storage_version="2.2")
    (path,) = (tmp_path / "ds" / "data").glob("*.lance")
    reader = LanceFileReader(str(path))
    (node,) = reader._roots
    layout = reader._column(node).encoding(0, reader._stored)
    assert layout.mini_block_layout.value_compression.WhichOneof("compression") == "rle"
    assert layout.mini_block_layout.num_buffers == 2
    one_block = type(layout)()
    one_block.CopyFrom(layout)
    one_block.mini_block_layout.num_buffers = 1
    apart = small_layouts._form(layout, pa.int64(), True)
    block = small_layouts._form(one_block, pa.int64(), True)
    assert apart is not None and block is not None
    assert (apart[0].buffers, block[0].buffers) == (2, 1)
    assert apart[2] is not block[2]


def test_leaves_of_one_layout_message_and_other_types_get_different_keys(tmp_path: Path) -> None:
    """A leaf's key is kept per layout message, and still says the leaf's type: the same
    message read as another type (or another chunk header) gets another key; the same message
    and type, the same interned key."""
    from lance_table.file.v2_1 import small_nested

    data = pa.table({"s": pa.array([{"a": i, "b": i * 2} for i in range(100)])})
    lance.write_dataset(data, tmp_path / "ds", data_storage_version="2.2")
    (path,) = (tmp_path / "ds" / "data").glob("*.lance")
    reader = LanceFileReader(str(path))
    (node,) = reader._roots
    leaf = node.children[0]
    layout = reader._column(leaf).encoding(0, reader._stored)
    assert layout.WhichOneof("layout") == "mini_block_layout"
    intern = small_layouts._interned
    first = small_nested._leaf_key(layout, True, pa.int64(), False, intern)
    assert small_nested._leaf_key(layout, True, pa.int64(), False, intern) is first
    assert small_nested._leaf_key(layout, True, pa.uint64(), False, intern) is not first
    assert small_nested._leaf_key(layout, False, pa.int64(), False, intern) is not first
    other = type(layout)()
    other.CopyFrom(layout)
    other.mini_block_layout.num_buffers = 2
    assert small_nested._leaf_key(other, True, pa.int64(), False, intern) is not first
    assert small_nested.layout(reader, node, True, intern) is not None
