"""``BlobColumn``: the rows of a binary column as file objects, as pylance's."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_table as lt

lance = pytest.importorskip("lance")


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
def test_rows_read_as_pylance_reads_them(kind: pa.DataType) -> None:
    values = [b"foo", None, b"", b"x" * 1000]
    column = pa.chunked_array([pa.array(values[:2], kind), pa.array(values[2:], kind)])

    def read(mod: object) -> list[bytes]:
        return [f.read() for f in mod.BlobColumn(column)]  # type: ignore[attr-defined]

    assert read(lt) == read(lance) == [v or b"" for v in values]  # a null row reads as empty


@pytest.mark.parametrize("bad", [pa.array([1, 2]), [b"a"]])
def test_anything_else_is_a_value_error(bad: object) -> None:
    for mod in (lt, lance):
        with pytest.raises(ValueError, match="Expected a"):
            mod.BlobColumn(bad)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_take_blobs_of_a_deleted_row_is_refused_as_pylance_refuses_it(tmp_path, version: str) -> None:
    field = pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    table = pa.table(
        [pa.array(range(5), pa.int64()), pa.array([bytes([i]) * 10 for i in range(5)], pa.large_binary())],
        schema=pa.schema([pa.field("idx", pa.int64()), field]),
    )
    for mod, name in ((lt, "ours"), (lance, "theirs")):
        ds = mod.write_dataset(table, tmp_path / name, data_storage_version=version)
        ids = ds.to_table(columns=[], with_row_id=True).column("_rowid").to_pylist()
        ds.delete("idx = 1")
        with pytest.raises(NotImplementedError, match="must not target deleted"):
            ds.take_blobs("b", ids=ids)
        kept = [i for k, i in enumerate(ids) if k != 1]
        assert [f.read() for f in ds.take_blobs("b", ids=kept)] == [bytes([i]) * 10 for i in (0, 2, 3, 4)]
