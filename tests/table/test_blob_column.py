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
