"""Large values: lance_table and pylance each write a 2.2 dataset of a few big strings or binaries.

Scenarios (``--mb`` sets the size of the large values; 100 by default):

* one string of ``--mb`` MB of words, and one binary of as many random bytes;
* 200 strings of ``--mb / 100`` MB each (medium values), and 200 random binaries of as many bytes;
* ``--mb`` MB of strings of 20 KB (full-zip values below pylance's per-value zstd threshold).

Times are medians of ``--runs`` rounds, the two libraries run alternately in this process. The
memory each write needs beyond its input is measured in a subprocess per library and scenario:
the peak resident size during the write (the kernel's high-water mark, reset just before it where
Linux allows) minus the resident size before it.

    python benchmarks/bench_large_values.py --mb 100 --runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))

MB = 1 << 20
WORDS = b"alpha beta gamma delta lorem ipsum dolor sit amet consectetur adipiscing elit sed do".split()


def _text(size: int, seed: int) -> bytes:
    """``size`` bytes of random words: a 4 MiB pattern repeated (too long a period for zstd's
    window to see, and no temporaries of the whole size)."""
    rng = np.random.default_rng(seed)
    count = min(size, 4 * MB) // 5 + 1
    base = b" ".join([WORDS[i] for i in rng.integers(0, len(WORDS), count).tolist()])
    return (base * -(-size // len(base)))[:size]


def _column(values: list[bytes], t: pa.DataType) -> pa.Table:
    """One column ``s`` of the values, built from one buffer (no per-value Python objects)."""
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    width = np.int64 if offsets[-1] >= 1 << 31 else np.int32
    t = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}[t] if width is np.int64 else t
    data = values[0] if len(values) == 1 else b"".join(values)
    arr = pa.Array.from_buffers(
        t, len(values), [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)]
    )
    return pa.table({"s": arr})


def scenarios(mb: int) -> dict[str, Callable[[], pa.Table]]:
    size = mb * MB
    rng = np.random.default_rng(0)
    return {
        f"1 string of {mb} MB": lambda: _column([_text(size, 1)], pa.string()),
        f"1 binary of {mb} MB (random)": lambda: _column([rng.bytes(size)], pa.binary()),
        f"200 strings of {mb / 100:g} MB": lambda: _column(
            [_text(size // 100, i) for i in range(200)], pa.string()
        ),
        f"200 binaries of {mb / 100:g} MB (random)": lambda: _column(
            [rng.bytes(size // 100) for _ in range(200)], pa.binary()
        ),
        f"{size // 20_000} strings of 20 KB": lambda: _column(
            [_text(20_000, i) for i in range(size // 20_000)], pa.string()
        ),
    }


def _write(side: str, table: pa.Table, uri: str) -> None:
    if side == "lance_table":
        import lance_table as lt

        lt.write_dataset(table, uri, mode="overwrite", data_storage_version="2.2")
    else:
        import lance

        lance.write_dataset(table, uri, mode="overwrite", data_storage_version="2.2")


def _rss_mb() -> tuple[float, float]:
    """(peak, current) resident size in MB, from /proc (ru_maxrss where there is none)."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
        return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return peak, peak


def _child(side: str, mb: int, name: str, uri: str) -> None:
    table = scenarios(mb)[name]()
    # imports and thread pools, outside the measurement (a small write: the heap a large one
    # leaves behind would hide the next one's peak)
    small = pa.table({"s": pa.array([b"warm up " * 8000, b"x"]).cast(table.schema.field("s").type)})
    _write(side, small, uri + "-warm")
    with contextlib.suppress(OSError, AttributeError):
        # hand the heap the input's making freed back to the system, so that a write cannot
        # reuse it unseen
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark
    _, before = _rss_mb()
    start = time.perf_counter()
    _write(side, table, uri)
    elapsed = time.perf_counter() - start
    peak, _ = _rss_mb()
    print(json.dumps({"extra_mb": max(peak - before, 0.0), "seconds": elapsed}))


def _memory(side: str, mb: int, name: str, work: Path) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--mb", str(mb), "--child", side, name, str(work / f"mem-{side}")],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["extra_mb"])


def main(argv: list[str] | None = None) -> int:
    from common import Report, Result, argument_parser, interleaved_medians

    parser = argument_parser(__doc__, runs=3)
    parser.add_argument("--mb", type=int, default=100, help="size of the large values, in MB")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "SCENARIO", "URI"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.mb, args.child[1], args.child[2])
        return 0
    import lance

    import lance_table as lt

    report = Report("Writing large values (format 2.2)", {"mb": args.mb, "runs": args.runs})
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_large_"))
    mine, theirs = str(work / "mine"), str(work / "theirs")
    try:
        for name, make in scenarios(args.mb).items():
            table = make()
            _write("lance_table", table, mine)
            _write("pylance", table, theirs)
            assert lance.dataset(mine).to_table().equals(table), name  # pylance reads ours exactly
            assert lt.dataset(mine).to_table().equals(table), name
            ours_s, theirs_s = interleaved_medians(
                lambda t=table: _write("lance_table", t, mine),
                lambda t=table: _write("pylance", t, theirs),
                args.runs,
            )
            del table
            extra = {side: _memory(side, args.mb, name, work) for side in ("lance_table", "pylance")}
            note = (
                f"extra memory: lance_table {extra['lance_table']:.0f} MB, pylance {extra['pylance']:.0f} MB"
            )
            report.add(Result(name, ours_s, theirs_s, args.runs, note))
            print(f"    {note}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.publish(args.out, "large_values")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
