"""lance_table in five minutes: a versioned dataset that pylance can open too.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

import lance_table as lt


def events(start: int, n: int) -> pa.Table:
    rng = np.random.default_rng(start)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + n)),
            "score": pa.array(rng.random(n)),
            "kind": pa.array(np.array(["click", "view", "buy"], dtype=object)[rng.integers(0, 3, n)]),
        }
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "events")

        ds = lt.write_dataset(
            events(0, 100_000), uri, max_rows_per_file=40_000, commit_message="initial load"
        )
        print(f"v{ds.version}: {ds.count_rows()} rows in {len(ds.get_fragments())} fragments")

        ds = lt.write_dataset(events(100_000, 20_000), uri, mode="append")
        print(f"v{ds.version}: appended, {ds.count_rows()} rows")

        ds.delete("kind = 'view' AND score < 0.5")
        print(f"v{ds.version}: deleted, {ds.count_rows()} rows")
        ds.tags.create("cleaned", ds.version)

        buys = ds.to_table(columns=["id", "score"], filter="kind = 'buy' AND score > 0.99")
        print(f"{buys.num_rows} high-score buys, e.g. {buys.slice(0, 2).to_pylist()}")
        # take() counts positions among the rows that are left: deleted rows have no position.
        ids = ds.take([0, 5, 7], columns=["id"]).column("id").to_pylist()
        print(f"rows at positions 0, 5 and 7 (after the delete): ids {ids}")

        before = ds.version
        ds.optimize.compact_files(target_rows_per_fragment=200_000)
        # As in pylance, a compaction commits two versions: one reserves the new fragments' ids,
        # the next swaps the rewritten fragments in.
        print(
            f"v{ds.version}: compacted into {len(ds.get_fragments())} fragment(s) "
            f"(v{before + 1} reserved fragment ids, v{ds.version} rewrote the data)"
        )

        first = lt.dataset(uri, version=1)
        tagged = lt.dataset(uri, version="cleaned")
        print(f"time travel: v1 had {first.count_rows()} rows; tag 'cleaned' is v{tagged.version}")
        # A new dataset's first version is an "overwrite" of nothing, as pylance records it.
        print("history:")
        for v in ds.versions():
            print(f"  v{v['version']:<2} {v['operation']:<18} {v['commit_message'] or ''}")

        try:
            import lance
        except ImportError:
            print("pylance is not installed: skipping the check that pylance opens the dataset")
            return
        print("pylance opens it too:", lance.dataset(uri).count_rows(), "rows")


if __name__ == "__main__":
    main()
