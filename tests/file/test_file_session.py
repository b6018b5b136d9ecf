"""``LanceFileSession``: files written and read by paths under one base path, as with pylance's
(each library reads the other's files)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_table.file
from lance_table.errors import UnsupportedOptionError

lance_file = pytest.importorskip("lance.file")

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("base", ["local", "memory"])
def test_session_round_trip_with_pylance(tmp_path: Path, base: str) -> None:
    root = str(tmp_path) if base == "local" else "memory://file-session-test"
    ours = lance_table.file.LanceFileSession(root)
    rows = pa.table({"a": [1, 2, 3], "s": ["x", None, "z"]})
    with ours.open_writer("ours.lance") as writer:
        writer.write_batch(rows)
    with ours.open_writer("sub/v21.lance", version="2.1", schema=rows.schema) as writer:
        writer.write_batch(rows)
    assert ours.open_reader("ours.lance").read_all().to_table() == rows
    assert ours.open_reader("sub/v21.lance", columns=["s"]).read_all().to_table() == rows.select(["s"])
    if base == "local":  # pylance's memory:// store is its own
        theirs = lance_file.LanceFileSession(root)
        assert theirs.open_reader("ours.lance").read_all().to_table() == rows
        with theirs.open_writer("theirs.lance") as writer:
            writer.write_batch(rows)
        assert ours.open_reader("theirs.lance").read_all().to_table() == rows
    with pytest.raises(FileNotFoundError):
        ours.open_reader("missing.lance")
    with pytest.raises(UnsupportedOptionError, match="table_id"):
        lance_table.file.LanceFileSession(root, table_id=["t"])
