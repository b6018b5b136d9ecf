"""String and binary writes in format 2.2 (or 2.1): lance_table vs pylance on the same columns.

Each scenario is one column of about ``--mb`` MB:

* text of 2-8 KiB per value (words drawn from a Zipf-like vocabulary: full-zip pages);
* random binaries of 2-8 KiB;
* 2-8 KiB texts repeated (50 distinct values);
* text of 300-700 bytes per value (full-zip, "hundreds of bytes");
* short text of 5-40 bytes (mini-block), and hex ids of 32 characters (mini-block).

For each: the write's wall and CPU time (process CPU time, all threads) on both sides, medians of
``--runs`` interleaved rounds, the size of each library's file, and lance_table's full scan of its
own file. pylance must read lance_table's file with identical contents (checked once).

    python benchmarks/bench_strings22.py --mb 40 --runs 3
    python benchmarks/bench_strings22.py --version 2.1 --only text
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))

MB = 1 << 20


def _vocabulary(rng: np.random.Generator, size: int = 5000) -> list[bytes]:
    letters = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", np.uint8)
    weights = np.linspace(2.0, 0.1, letters.size)
    weights /= weights.sum()
    words = []
    for n in rng.integers(1, 11, size).tolist():
        words.append(letters[rng.choice(letters.size, n, p=weights)].tobytes())
    return words


def _text_stream(total: int, seed: int) -> np.ndarray:
    """``total`` bytes of words (Zipf-like frequencies), spaces and some punctuation."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng)
    vocab = [w + b" " for w in vocab] + [w + b", " for w in vocab[:200]] + [w + b". " for w in vocab[:200]]
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    p = 1 / ranks
    p /= p.sum()
    lengths = np.array([len(w) for w in vocab], np.int64)
    count = int(total / float((lengths * p).sum()) * 1.05) + 16
    picks = rng.choice(len(vocab), count, p=p)
    flat = np.frombuffer(b"".join(vocab), np.uint8)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    sel_len = lengths[picks]
    out_at = np.concatenate([[0], np.cumsum(sel_len)[:-1]])
    idx = np.repeat(starts[picks] - out_at, sel_len) + np.arange(int(sel_len.sum()))
    return flat[idx][:total]


def _column(data: np.ndarray, lengths: np.ndarray, t: pa.DataType) -> pa.Array:
    offsets = np.zeros(lengths.size + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        t, int(lengths.size), [None, pa.py_buffer(offsets), pa.py_buffer(data[: offsets[-1]].tobytes())]
    )


def _lengths(rng: np.random.Generator, total: int, lo: int, hi: int) -> np.ndarray:
    n = total // ((lo + hi) // 2)
    return rng.integers(lo, hi + 1, n)


def scenarios(mb: int) -> dict[str, Callable[[], pa.Table]]:
    size = mb * MB

    def text(lo: int, hi: int) -> pa.Table:
        lengths = _lengths(np.random.default_rng(lo), size, lo, hi)
        return pa.table({"s": _column(_text_stream(int(lengths.sum()), lo), lengths, pa.string())})

    def random_bytes() -> pa.Table:
        rng = np.random.default_rng(1)
        lengths = _lengths(rng, size, 2048, 8192)
        data = np.frombuffer(rng.bytes(int(lengths.sum())), np.uint8)
        return pa.table({"s": _column(data, lengths, pa.binary())})

    def repeated() -> pa.Table:
        rng = np.random.default_rng(2)
        lengths = rng.integers(2048, 8193, 50)
        distinct = _column(_text_stream(int(lengths.sum()), 2), lengths, pa.string())
        n = size // 5000
        return pa.table({"s": distinct.take(pa.array(rng.integers(0, 50, n)))})

    def hex_ids() -> pa.Table:
        rng = np.random.default_rng(3)
        n = size // 32
        raw = np.frombuffer(rng.bytes(n * 16), np.uint8)
        hexdig = np.frombuffer(b"0123456789abcdef", np.uint8)
        data = np.stack([hexdig[raw >> 4], hexdig[raw & 15]], axis=1).reshape(-1)
        return pa.table({"s": _column(data, np.full(n, 32), pa.string())})

    return {
        "text 2-8 KiB": lambda: text(2048, 8192),
        "random binary 2-8 KiB": random_bytes,
        "repeated text 2-8 KiB": repeated,
        "text 300-700 B": lambda: text(300, 700),
        "short text 5-40 B": lambda: text(5, 40),
        "hex ids 32 B": hex_ids,
    }


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _size(path: Path) -> int:
    """Bytes of the dataset's data files (called after a first write, before any overwrite)."""
    return sum(f.stat().st_size for f in (path / "data").iterdir())


def main(argv: list[str] | None = None) -> int:
    from common import argument_parser

    parser = argument_parser(__doc__, runs=3)
    parser.add_argument("--mb", type=int, default=40, help="size of each column, in MB")
    parser.add_argument("--version", default="2.2", help="data_storage_version (2.1 or 2.2)")
    parser.add_argument("--only", default="", help="run the scenarios whose name contains this")
    args = parser.parse_args(argv)
    import lance

    import lance_table as lt

    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_str_"))
    ours, theirs = work / "ours", work / "theirs"
    v = args.version
    rows = []
    print(f"load average before: {os.getloadavg()}", flush=True)
    try:
        for name, make in scenarios(args.mb).items():
            if args.only not in name:
                continue
            table = make()

            def write_ours(t: pa.Table = table) -> object:
                return lt.write_dataset(t, ours, mode="overwrite", data_storage_version=v)

            def write_theirs(t: pa.Table = table) -> object:
                return lance.write_dataset(t, theirs, mode="overwrite", data_storage_version=v)

            shutil.rmtree(ours, ignore_errors=True)
            shutil.rmtree(theirs, ignore_errors=True)
            write_ours()
            write_theirs()
            sizes = _size(ours) / MB, _size(theirs) / MB
            got = lance.dataset(ours).to_table()
            assert got.equals(table), f"{name}: pylance reads our file differently"
            times: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": []}
            for r in range(args.runs):
                order = (("ours", write_ours), ("theirs", write_theirs))
                for side, fn in order if r % 2 == 0 else order[::-1]:
                    times[side].append(_timed(fn))
            scan = [_timed(lambda: lt.dataset(ours).to_table())[0] for _ in range(args.runs)]
            pscan = [_timed(lambda: lance.dataset(ours).to_table())[0] for _ in range(args.runs)]
            med = {
                side: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
                for side, ts in times.items()
            }
            row = (
                name,
                med["ours"],
                med["theirs"],
                *sizes,
                statistics.median(scan),
                statistics.median(pscan),
                table.nbytes / MB,
            )
            rows.append(row)
            (ow, oc), (tw, tc) = row[1], row[2]
            print(
                f"{name:<24} {row[7]:5.1f} MB  wall {ow:6.3f}/{tw:6.3f} s = {ow / tw:5.2f}  "
                f"cpu {oc:6.3f}/{tc:6.3f} s = {oc / tc:5.2f}  size {row[3]:5.1f}/{row[4]:5.1f} MB  "
                f"our scan of ours {row[5] * 1000:6.1f} ms (pylance's {row[6] * 1000:6.1f} ms)",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
