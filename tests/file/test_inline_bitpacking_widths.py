"""Inline-bitpacked integer pages pylance writes, with blocks of every bit width from 0 to the
type's, read back exactly: page by page, and as batches of whole fragments (one numpy pass over
the chunks of many files), with runs of one width unpacked in place or a width at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table as lt
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import inline_blocks
from lance_table.table import fragment_batch

lance = pytest.importorskip("lance")

BLOCK = 1024
PER_FILE = 22 * BLOCK  # three files of 22 blocks, each block its own mini-block chunk


def _column(t: int, signed: bool, widths: list[int], rng: np.random.Generator) -> np.ndarray:
    """Blocks of 1024 values whose OR has the bit length ``widths[k]`` (what pylance packs them at)."""
    blocks = []
    for w in widths:
        if w == 0:
            v = np.zeros(BLOCK, np.uint64)
        elif w == 64:
            v = rng.integers(0, 2**63, BLOCK, dtype=np.uint64) | np.uint64(2**63)
        else:
            v = rng.integers(1 << (w - 1), 1 << w, BLOCK, dtype=np.uint64)
        blocks.append(v.astype(f"uint{t}"))
    values = np.concatenate(blocks)
    return values.view(f"int{t}") if signed else values


@pytest.fixture(scope="module")
def every_width(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    rng = np.random.default_rng(11)
    blocks = 66
    columns = {}
    for name, t, signed in [("u8", 8, False), ("i16", 16, True), ("u32", 32, False), ("i64", 64, True)]:
        cycle = [k % (t + 1) for k in range(blocks)]  # every width, one block each
        columns[name] = _column(t, signed, cycle, rng)
    # runs of one width (sorted-like data), one across files; narrow widths of many repeated
    # values would make pylance write a dictionary
    runs = [w for w in (17, 33, 40, 63, 64, 20, 48, 30) for _ in range(8)] + [25, 25]
    columns["u64"] = _column(64, False, runs, rng)
    table = pa.table(columns)
    uri = str(tmp_path_factory.mktemp("widths") / "ds")
    lance.write_dataset(table, uri, data_storage_version="2.2", max_rows_per_file=PER_FILE)
    return uri, table


@pytest.mark.parametrize("run_blocks", [1, 8, 10**9], ids=["in-place", "default", "by-width"])
def test_every_width_reads_back_exactly(
    every_width: tuple[str, pa.Table], run_blocks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, table = every_width
    monkeypatch.setattr(inline_blocks, "RUN_BLOCKS", run_blocks)
    ds = lt.dataset(uri)
    frags = ds._snapshot.fragment_readers()
    assert len(frags) == 3
    plans = fragment_batch.plans(frags, table.column_names)
    assert all(p is not None and p[1].chunks == 22 for p in plans)  # read as one batch
    assert ds.to_table().equals(table)
    # each file on its own, page by page
    files = [Path(uri) / "data" / f.fragment.files[0].path for f in frags]
    pieces = [LanceFileReader(str(p)).read_all() for p in files]
    assert pa.concat_tables(pieces).equals(table)


def test_filters_and_deletes_on_every_width_equal_pylance(
    every_width: tuple[str, pa.Table], tmp_path: Path
) -> None:
    uri, table = every_width
    for predicate, expr in [
        # a floor: the narrower blocks are not unpacked
        ("u64 >= 4294967296", pc.field("u64") >= pa.scalar(2**32, pa.uint64())),
        ("u32 = 7", pc.field("u32") == 7),
        ("i64 < 0 AND u8 > 100", (pc.field("i64") < 0) & (pc.field("u8") > 100)),
        ("i16 >= 1000", pc.field("i16") >= 1000),
    ]:
        assert lt.dataset(uri).to_table(filter=predicate).equals(table.filter(expr)), predicate
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance.write_dataset(table, str(ours), data_storage_version="2.2", max_rows_per_file=PER_FILE)
    lance.write_dataset(table, str(theirs), data_storage_version="2.2", max_rows_per_file=PER_FILE)
    predicate = "u64 >= 1099511627776 OR u32 < 100"
    lt.dataset(ours).delete(predicate)
    lance.dataset(str(theirs)).delete(predicate)
    assert lance.dataset(str(ours)).to_table().equals(lance.dataset(str(theirs)).to_table())
    assert lt.dataset(ours).to_table().equals(lance.dataset(str(theirs)).to_table())
