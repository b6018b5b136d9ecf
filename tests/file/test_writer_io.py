"""Page writes overlap the encoding of the next batch: the file reads back whole, and a failing
sink surfaces its error instead of hanging or losing it."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from lance_table.file import LanceFileReader, LanceFileWriter


def _batches(n: int, rows: int) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(0)
    return [
        pa.record_batch({"a": rng.integers(0, 1 << 40, rows), "s": pa.array([f"v{i}" for i in range(rows)])})
        for _ in range(n)
    ]


class _Failing(io.BytesIO):
    """A sink whose writes fail once it holds ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        if self.tell() + len(memoryview(data).cast("B")) > self.limit:
            raise OSError("disk full")
        return super().write(data)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_background_page_writes_keep_the_bytes_and_errors(tmp_path, version):
    batches = _batches(6, 50_000)
    table = pa.Table.from_batches(batches)
    # small pages: every batch hands pages to the background writer
    with LanceFileWriter(tmp_path / "a.lance", table.schema, version=version, page_size_bytes=1 << 16) as w:
        for b in batches:
            w.write(b)
    assert LanceFileReader(tmp_path / "a.lance").read_all().equals(table)
    sink = _Failing(200_000)
    writer = LanceFileWriter(sink, table.schema, version=version, page_size_bytes=1 << 16)
    with pytest.raises(OSError, match="disk full"):
        for b in batches:
            writer.write(b)
        writer.close()
    writer.abort()
