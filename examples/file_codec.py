"""Write a Lance data file with lance_table, read it back in several ways.

Run: python examples/file_codec.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter


def main() -> None:
    rng = np.random.default_rng(0)
    n = 100_000
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "score": pa.array(rng.random(n)),
            "name": pa.array([f"user-{i}" for i in range(n)]),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8),
            "tags": pa.array([["a", "b"][: i % 3] for i in range(n)], pa.list_(pa.string())),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "users.lance"
        # Stream batches into one file; pages are flushed per column every 8 MiB by default.
        with LanceFileWriter(path, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=10_000):
                writer.write(batch)
        print(f"wrote {path.name}: {path.stat().st_size / 2**20:.1f} MiB, {n} rows")

        reader = LanceFileReader(path)
        print(f"format {reader.version}, schema:\n{reader.schema}")
        assert reader.read_all().equals(table)
        print("first rows:", reader.read_range(0, 3, columns=["id", "name", "tags"]).to_pylist())
        print("take [99999, 5, 5]:", reader.take([99_999, 5, 5], columns=["id", "score"]).to_pylist())
        total = sum(batch.num_rows for batch in reader.iter_batches(batch_size=25_000, columns=["score"]))
        print(f"streamed {total} scores in batches of 25000")


if __name__ == "__main__":
    main()
