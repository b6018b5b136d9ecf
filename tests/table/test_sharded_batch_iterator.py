"""pylance's ``ShardedBatchIterator`` at its path: each shard gets the rows pylance's gives it."""

from __future__ import annotations

import warnings
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance._dataset.sharded_batch_iterator import ShardedBatchIterator as PylanceIterator

import lance_table as lt
from lance_table._dataset.sharded_batch_iterator import ShardedBatchIterator

pytestmark = pytest.mark.interop


def _rows(it) -> list[int]:
    return pa.concat_arrays([b["a"] for b in it]).to_pylist() if it is not None else []


@pytest.mark.parametrize(
    ("granularity", "batch_size"), [("fragment", 40), ("batch", 15), ("batch", 100)], ids=str
)
def test_shards_match_pylance(tmp_path: Path, granularity: str, batch_size: int) -> None:
    lance.write_dataset(pa.table({"a": range(1186), "b": range(1186)}), tmp_path, max_rows_per_file=100)
    lance.dataset(tmp_path).delete("a % 10 = 3")
    seen: list[int] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rank in range(3):
            kw = {"columns": ["a"], "batch_size": batch_size, "granularity": granularity}
            ours = _rows(ShardedBatchIterator(lt.dataset(tmp_path), rank, 3, **kw))
            assert ours == _rows(PylanceIterator(lance.dataset(tmp_path), rank, 3, **kw))
            seen += ours
    assert sorted(seen) == [a for a in range(1186) if a % 10 != 3]


def test_bad_options(tmp_path: Path) -> None:
    lt.write_dataset(pa.table({"a": range(10)}), tmp_path)
    with pytest.warns(UserWarning, match="deprecated"):
        it = ShardedBatchIterator(str(tmp_path), 0, 2, granularity="rows")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="granularity"):
        iter(it)
    with pytest.warns(UserWarning), pytest.raises(NotImplementedError):
        next(iter(ShardedBatchIterator(str(tmp_path), 0, 2, granularity="batch", with_row_id=True)))
