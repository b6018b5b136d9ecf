from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_table.table import deletion
from lance_table.table.readers import READERS


def make_rows(start: int, n: int, seed: int = 0) -> pa.Table:
    """Deterministic rows with ids ``start .. start + n``."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array(rng.random(n)),
            "s": pa.array([f"row-{i}" if i % 13 else None for i in ids.tolist()]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 2).astype(np.float32)), 2),
            "tags": pa.array([["a", "b"][: i % 3] for i in ids.tolist()], pa.list_(pa.string())),
        }
    )


@pytest.fixture
def rows():
    return make_rows


def _clear_caches() -> None:
    READERS.clear()
    deletion.DELETIONS.clear()


@pytest.fixture
def empty_caches() -> None:
    """No file reader or deletion vector kept from an earlier test (a module of reads of many
    small fragments uses it with ``pytestmark = pytest.mark.usefixtures("empty_caches")``)."""
    _clear_caches()


@pytest.fixture
def copy(many: str, tmp_path: Path) -> str:
    """A copy of the test module's dataset ``many`` (its own fixture), read with no reader or
    deletion vector kept from before."""
    _clear_caches()
    uri = str(tmp_path / "copy")
    shutil.copytree(many, uri)
    return uri
