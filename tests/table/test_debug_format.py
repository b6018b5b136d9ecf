"""``lance_table.debug.format_fragment`` and ``format_schema`` print what pylance's print, on the
same dataset (nested fields, strings, schema metadata, a deletion file)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_table
import lance_table.debug

lance = pytest.importorskip("lance")
debug = pytest.importorskip("lance.debug")

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("version", ["2.0", "stable"])
def test_same_text_as_pylance(tmp_path: Path, version: str) -> None:
    rows = pa.table({"a": range(5), "s": [{"x": 1, "y": "q"}] * 5, "t": ["a"] * 5})
    path = str(tmp_path / "ds")
    theirs = lance.write_dataset(
        rows.replace_schema_metadata({"k": "v"}), path, max_rows_per_file=3, data_storage_version=version
    )
    theirs.delete("a = 1")
    ours = lance_table.dataset(path)
    for mine, other in zip(ours.get_fragments(), theirs.get_fragments()):
        text = lance_table.debug.format_fragment(mine.metadata, ours)
        assert text == debug.format_fragment(other.metadata, theirs)
    assert "major_version: 2" in text
    assert lance_table.debug.format_schema(ours) == debug.format_schema(theirs)
    with pytest.raises(TypeError):
        lance_table.debug.format_fragment("not metadata", ours)
