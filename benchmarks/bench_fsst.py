"""FSST strings in format 2.2: projecting one string column of a pylance-written dataset.

pylance writes short strings as FSST mini-block pages. Each scenario writes one dataset with
pylance (``--rows`` rows, one string column and an id) and times ``to_table(columns=["s"])`` on
both sides, interleaved, reporting median wall and process CPU times (all threads) and the load
average. lance_table's result must equal pylance's (checked once per scenario).

Columns: ``text20`` (20 random lowercase letters, as in the dataset matrix), ``short text``
(5-40 bytes of words), ``hex ids`` (32 hex digits), ``urls`` (a few shared prefixes and a tail).
Two more scenarios write the dataset matrix's whole schema (id, x, cat, text of 20 letters, vec)
and time ``schema text`` (``to_table(columns=["text"])``) and ``schema full scan`` (``to_table()``).

``--fragment-rows`` has pylance write files of at most that many rows: each file then has its own
symbol table (issue 28's living table: 1M rows in 20k-row fragments are 50 files, 50 tables).

    python benchmarks/bench_fsst.py --rows 1000000 --runs 7
    python benchmarks/bench_fsst.py --only hex --profile
    python benchmarks/bench_fsst.py --rows 1000000 --fragment-rows 20000 --only schema --runs 5

``--keep DIR`` writes the datasets under DIR and keeps them; a later run with the same DIR, rows and
fragment rows reads them again instead of writing them.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))

from bench_strings22 import _column, _text_stream
from common import argument_parser, benchmark_table, interleaved_result


def columns(rows: int) -> dict[str, Callable[[], pa.Array]]:
    """The string columns of the scenarios, ``rows`` values each."""

    def text20() -> pa.Array:
        rng = np.random.default_rng(42)
        letters = rng.integers(ord("a"), ord("z") + 1, rows * 20, dtype=np.uint8)
        return _column(letters, np.full(rows, 20), pa.string())

    def short_text() -> pa.Array:
        rng = np.random.default_rng(5)
        lengths = rng.integers(5, 41, rows)
        return _column(_text_stream(int(lengths.sum()), 5), lengths, pa.string())

    def hex_ids() -> pa.Array:
        rng = np.random.default_rng(3)
        raw = np.frombuffer(rng.bytes(rows * 16), np.uint8)
        hexdig = np.frombuffer(b"0123456789abcdef", np.uint8)
        data = np.stack([hexdig[raw >> 4], hexdig[raw & 15]], axis=1).reshape(-1)
        return _column(data, np.full(rows, 32), pa.string())

    def urls() -> pa.Array:
        rng = np.random.default_rng(9)
        hosts = ["https://example.com/", "https://docs.example.org/api/", "http://shop.test/item?id="]
        tails = _text_stream(rows * 12, 9)
        lengths = rng.integers(4, 20, rows)
        pick = rng.integers(0, len(hosts), rows)
        values, at = [], 0
        for h, n in zip(pick.tolist(), lengths.tolist()):
            values.append(hosts[h] + tails[at : at + n].tobytes().decode().replace(" ", "-"))
            at += n
        return pa.array(values, pa.string())

    return {"text20": text20, "short text": short_text, "hex ids": hex_ids, "urls": urls}


#: the scenarios on the dataset matrix's schema: the columns they read (None: every column)
SCHEMA_SCENARIOS: dict[str, list[str] | None] = {"schema text": ["text"], "schema full scan": None}


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=1_000_000, runs=7)
    parser.add_argument("--only", default="", help="run the scenarios whose name contains this")
    parser.add_argument("--profile", action="store_true", help="cProfile lance_table's projection")
    parser.add_argument(
        "--fragment-rows", type=int, default=0, help="rows per file pylance writes (0: its default)"
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="write the datasets here and keep them (reused when there)"
    )
    args = parser.parse_args(argv)
    import lance

    import lance_table as lt

    if args.keep is not None:
        work = args.keep / f"rows{args.rows}_frag{args.fragment_rows}"
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="lance_table_bench_fsst_"))
    per_file = {"max_rows_per_file": args.fragment_rows} if args.fragment_rows else {}
    print(f"load average before: {os.getloadavg()}", flush=True)
    scenarios: dict[str, tuple[Callable[[], pa.Table], list[str] | None]] = {
        name: (lambda make=make: pa.table({"id": pa.array(np.arange(args.rows)), "s": make()}), ["s"])
        for name, make in columns(args.rows).items()
    }
    scenarios.update(
        {name: (lambda: benchmark_table(args.rows), cols) for name, cols in SCHEMA_SCENARIOS.items()}
    )
    written: dict[int, str] = {}  # the dataset of each table maker (both schema scenarios share one)
    try:
        for name, (make, cols) in scenarios.items():
            if args.only not in name:
                continue
            key = id(make) if cols == ["s"] else 0
            if key not in written:
                uri = written[key] = str(work / (name.replace(" ", "_") if key else "schema"))
                if not Path(uri, "_versions").is_dir():
                    table = make()
                    lance.write_dataset(table, uri, data_storage_version="2.2", **per_file)
                    del table
            uri = written[key]
            got = lt.dataset(uri).to_table(columns=cols)
            assert got.equals(lance.dataset(uri).to_table(columns=cols)), name
            mb = got.nbytes / 2**20
            del got
            if args.profile:
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(args.runs):
                    lt.dataset(uri).to_table(columns=cols)
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(15)
                continue
            r = interleaved_result(
                name,
                lambda u=uri, c=cols: lt.dataset(u).to_table(columns=c),
                lambda u=uri, c=cols: lance.dataset(u).to_table(columns=c),
                args.runs,
            )
            print(
                f"{name:<16} {mb:6.1f} MB  wall {r.lance_table_s * 1e3:7.1f}/{r.pylance_s * 1e3:7.1f} ms"
                f" = {r.ratio:5.2f}  cpu {(r.lance_table_cpu_s or 0) * 1e3:7.1f}/"
                f"{(r.pylance_cpu_s or 0) * 1e3:7.1f} ms = {r.cpu_ratio:5.2f}  load {r.load or 0:.2f}",
                flush=True,
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
