"""One ``LanceFileWriter`` written from several threads at once keeps every row whole, as pylance's
writer does (its batches may land in any order, never mixed)."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import lance_table.file as lf


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_concurrent_write_batch_calls_never_mix_rows(tmp_path, version: str) -> None:
    threads, batches, rows = 6, 20, 300
    start = threading.Barrier(threads)

    def work(writer: lf.LanceFileWriter, t: int) -> None:
        start.wait()
        for b in range(batches):
            base = (t * batches + b) * rows
            values = list(range(base, base + rows))
            writer.write_batch(
                pa.table(
                    {
                        "thread": pa.array([t] * rows, pa.int64()),
                        "value": pa.array(values, pa.int64()),
                        "text": [f"t{t}-v{v}" for v in values],
                    }
                )
            )

    path = str(tmp_path / "f.lance")
    with lf.LanceFileWriter(path, version=version) as writer:
        workers = [threading.Thread(target=work, args=(writer, t)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    got = lf.LanceFileReader(path).read_all().to_table().to_pydict()
    assert len(got["value"]) == threads * batches * rows
    assert sorted(got["value"]) == list(range(threads * batches * rows))
    for t, v, s in zip(got["thread"], got["value"], got["text"]):
        assert (t, s) == (v // (batches * rows), f"t{t}-v{v}")
