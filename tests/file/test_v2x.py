"""Reading files pylance writes in formats 2.1 and 2.2 (its default), for columns without nesting."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal
from typecases import type_cases

from lance_table.errors import UnsupportedFormatError
from lance_table.file import LanceFileReader

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

NESTED = {"list_int", "large_list", "list_struct", "list_list", "struct", "fsl_fsl"}


def _big_cases() -> dict[str, pa.Table]:
    """Data for which pylance picks its 2.1/2.2 compressions (they appear only on larger pages)."""
    rng = np.random.default_rng(0)
    n = 100_000
    mask = rng.random(n) < 0.2
    return {
        "bitpacked_ints": pa.table({"x": pa.array(rng.integers(0, 100, n), pa.int32())}),
        "sequence": pa.table({"x": pa.array(np.arange(n))}),
        "random_floats": pa.table({"x": pa.array(rng.random(n))}),
        "nullable_floats": pa.table({"x": pa.array(rng.random(n).astype(np.float32), mask=mask)}),
        "constant": pa.table({"x": pa.array(np.full(n, 7))}),
        "long_runs": pa.table({"x": pa.array(np.repeat(np.arange(n // 1000), 1000))}),
        "dictionary_strings": pa.table(
            {"s": pa.array(np.array(["a", "bb", "ccc"], dtype=object)[rng.integers(0, 3, n)])}
        ),
        "fsst_strings": pa.table({"s": pa.array([f"value-{i:012d}-x" for i in range(n)])}),
        "long_strings_full_zip": pa.table({"s": pa.array(["y" * 300 + str(i) for i in range(2000)])}),
        "nullable_binary": pa.table(
            {
                "b": pa.array(
                    [bytes(rng.integers(0, 256, i % 40, dtype=np.uint8)) for i in range(n)], mask=mask
                )
            }
        ),
        "bools": pa.table({"b": pa.array(rng.random(n) < 0.5)}),
        "small_vectors": pa.table(
            {"v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4)}
        ),
        "wide_vectors_full_zip": pa.table(
            {"v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(3000 * 128).astype(np.float32)), 128)}
        ),
        "all_null": pa.table({"x": pa.nulls(n, pa.int64())}),
    }


CASES = {**{k: v for k, v in type_cases().items() if k not in NESTED}, **_big_cases()}


def _write(path, table: pa.Table, version: str) -> None:
    with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
        w.write_batch(table)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_we_read_what_pylance_writes(tmp_path, version, name):
    table = CASES[name]
    path = tmp_path / "f.lance"
    _write(path, table, version)
    reader = LanceFileReader(path)
    assert reader.version == version
    theirs = lance_file.LanceFileReader(str(path)).read_all().to_table()
    ours = reader.read_all()
    assert ours.equals(theirs)
    assert_tables_equal(ours, table, check_metadata=False)
    rng = np.random.default_rng(len(name))
    idx = rng.integers(0, table.num_rows, 50)
    assert_tables_equal(reader.take(idx), table.take(pa.array(idx)), check_metadata=False)
    lo = int(rng.integers(0, table.num_rows))
    assert_tables_equal(reader.read_range(lo, lo + 300), table.slice(lo, 300), check_metadata=False)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(NESTED))
def test_nested_columns_are_refused_clearly(tmp_path, version, name):
    table = type_cases()[name]
    path = tmp_path / "f.lance"
    _write(path, table, version)
    with pytest.raises(UnsupportedFormatError, match=version.replace(".", r"\.")):
        LanceFileReader(path).read_all()
