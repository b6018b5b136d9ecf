"""The README's Structured Streaming snippet runs as written: the copy it starts follows the dataset,
the rows there at the start and the rows a later append adds."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.spark

README = Path(__file__).parents[2] / "README.md"


def test_readme_streaming_snippet(spark, tmp_path: Path) -> None:
    text = README.read_text()
    section = text[text.index("### Structured Streaming") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    # the README's trigger waits a minute between micro-batches: the test does not
    assert 'processingTime="1 minute"' in snippet
    snippet = snippet.replace('processingTime="1 minute"', 'processingTime="1 second"')
    events, copy = str(tmp_path / "events"), str(tmp_path / "copy")
    lt.write_dataset(pa.table({"id": pa.array(range(100), pa.int64())}), events)
    namespace = {"spark": spark, "events": events, "copy": copy, "checkpoint": str(tmp_path / "ck")}
    exec(snippet, namespace)  # the README's own code
    query = namespace["query"]
    try:
        query.processAllAvailable()
        lt.write_dataset(pa.table({"id": pa.array(range(100, 150), pa.int64())}), events, mode="append")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(lt.dataset(copy).to_table()["id"].to_pylist()) == list(range(150))
