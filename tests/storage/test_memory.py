"""``memory://`` datasets share one process-wide store; ``clear_memory`` frees them."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import DatasetNotFoundError, InvalidURIError
from lance_table.storage import clear_memory


def test_clear_one_dataset_keeps_its_neighbours() -> None:
    root = f"memory://{uuid.uuid4().hex}"
    lance_table.write_dataset(pa.table({"a": [1, 2]}), f"{root}/ds")
    lance_table.write_dataset(pa.table({"a": [3]}), f"{root}/ds2")  # a name that starts the same
    assert clear_memory(f"{root}/ds") >= 3  # a manifest, a transaction and a data file
    with pytest.raises(DatasetNotFoundError):
        lance_table.dataset(f"{root}/ds")
    assert lance_table.dataset(f"{root}/ds2").count_rows() == 1
    lance_table.write_dataset(pa.table({"a": [5, 6, 7]}), f"{root}/ds")  # the name is free again
    assert lance_table.dataset(f"{root}/ds").count_rows() == 3
    assert clear_memory(root) >= 6
    assert clear_memory(root) == 0


def test_clear_everything_and_bad_uris() -> None:
    lance_table.write_dataset(pa.table({"a": [1]}), f"memory://{uuid.uuid4().hex}")
    assert clear_memory() >= 3
    with pytest.raises(InvalidURIError, match="not a memory://"):
        clear_memory("/tmp/x")
