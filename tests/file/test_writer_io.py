"""Page writes overlap the encoding of the next batch: the file reads back whole, and a failing
sink surfaces its error instead of hanging or losing it."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter


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


class _Counted:
    """Counts the tasks handed to lance_table's pools (``submit`` on any of them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from lance_table import _parallel

        self.tasks = 0
        real = _parallel.pool

        def pool(name: str):  # type: ignore[no-untyped-def]
            found = real(name)
            counter = self

            class Counting:
                def submit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                    counter.tasks += 1
                    return found.submit(*args, **kwargs)

            return Counting()

        monkeypatch.setattr(_parallel, "pool", pool)
        monkeypatch.setattr("lance_table.file.writer.pool", pool)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_small_batches_are_encoded_without_thread_hand_offs(monkeypatch, version):
    counted = _Counted(monkeypatch)
    table = pa.Table.from_batches(_batches(3, 100))
    sink = io.BytesIO()
    with LanceFileWriter(sink, table.schema, version=version) as w:
        for b in table.to_batches():
            w.write(b)
    assert counted.tasks == 0
    assert LanceFileReader(io.BytesIO(sink.getvalue())).read_all().equals(table)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_inline_and_threaded_encoding_write_the_same_bytes(monkeypatch, version):
    from lance_table.file import writer as writer_module

    batches = _batches(4, 2000)
    schema = batches[0].schema

    def write(page_size: int) -> bytes:
        sink = io.BytesIO()
        with LanceFileWriter(sink, schema, version=version, page_size_bytes=page_size) as w:
            for b in batches:
                w.write(b)
        return sink.getvalue()

    inline = write(1 << 16), write(1 << 23)
    counted = _Counted(monkeypatch)
    monkeypatch.setattr(writer_module, "INLINE_ENCODE_BYTES", 0)  # everything on threads
    assert (write(1 << 16), write(1 << 23)) == inline
    assert counted.tasks > 0


def test_a_batch_that_completes_a_page_is_encoded_on_threads(monkeypatch):
    counted = _Counted(monkeypatch)
    (batch,) = _batches(1, 100)
    with LanceFileWriter(io.BytesIO(), batch.schema, version="2.2", page_size_bytes=256) as w:
        w.write(batch)  # small, but past the page budget: pages are encoded now
        assert counted.tasks > 0


def _wide(rows: int) -> pa.RecordBatch:
    """Top-level columns of about 120 bytes a row: 20k rows pass the inline bound (2 MB)."""
    rng = np.random.default_rng(1)
    text = pa.array([f"text-{v:020d}" for v in rng.integers(0, 1 << 60, rows)])
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16, dtype=np.float32)), 16)
    return pa.record_batch({"id": np.arange(rows), "x": rng.random(rows), "text": text, "vec": vec})


def test_a_large_batch_of_top_level_columns_that_fills_no_page_is_added_without_hand_offs(monkeypatch):
    from lance_table.file import writer as writer_module

    batch = _wide(20_000)
    assert batch.nbytes > writer_module._inline_bytes()
    counted = _Counted(monkeypatch)
    sink = io.BytesIO()
    with LanceFileWriter(sink, batch.schema, version="2.2") as w:
        w.write(batch)  # rows are only wrapped until the file closes: nothing to hand off
        assert counted.tasks == 0
    # closing encodes its 2.4 MB on threads: a hand-off per worker but this one
    assert 0 < counted.tasks < 4
    assert LanceFileReader(io.BytesIO(sink.getvalue())).read_all().equals(pa.Table.from_batches([batch]))
    nested = pa.record_batch({"s": pa.StructArray.from_arrays([batch["id"]], ["a"]), "x": batch["x"]})
    counted.tasks = 0
    monkeypatch.setattr(writer_module, "INLINE_ENCODE_BYTES", 1024)  # (past the bound, not flat)
    with LanceFileWriter(io.BytesIO(), nested.schema, version="2.2") as w:
        w.write(nested)
        assert counted.tasks > 0


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_shared_threaded_and_inline_encoding_write_the_same_bytes(monkeypatch, version):
    from lance_table.file import writer as writer_module
    from lance_table.file.v2_1 import general_values

    batches = [_wide(3000), _wide(5000)]

    def write() -> bytes:
        sink = io.BytesIO()
        with LanceFileWriter(sink, batches[0].schema, version=version, page_size_bytes=1 << 18) as w:
            for b in batches:
                w.write(b)
        return sink.getvalue()

    inline = write()
    counted = _Counted(monkeypatch)
    monkeypatch.setattr(writer_module, "INLINE_ENCODE_BYTES", 0)  # everything on threads
    assert write() == inline
    shared = counted.tasks
    monkeypatch.setattr(general_values, "_INLINE_COMPRESS_BYTES", 0)  # chunks compressed on threads
    monkeypatch.setattr(general_values, "_COMPRESS_GROUP", 4)
    counted.tasks = 0
    assert write() == inline
    assert shared > 0
    assert counted.tasks > shared if version == "2.2" else counted.tasks == shared  # (2.2: zstd chunks)
