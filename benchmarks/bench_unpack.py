"""FastLanes bit-unpacking speed: ns per value for each type width T and bit width W.

Three layouts of ``--values`` values (rounded to whole 1024-value blocks):
  ``back``    blocks back to back (out-of-line bitpacking, a whole run);
  ``led``     each block led by one word holding its width (inline bitpacking of pylance's 2.1+
              mini-block chunks): read through a strided view;
  ``gather``  blocks at uneven places: gathered.
Each timing is the median CPU time (of this thread) of ``--runs`` calls unpacking into a
preallocated ``out=``.

    python benchmarks/bench_unpack.py --types 64 --widths 1,7,20,33,64
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial

import numpy as np

from lance_table.file.compression import bitpacking


def _inputs(
    t: int, w: int, blocks: int, rng: np.random.Generator
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    dtype = bitpacking.DTYPES[t]
    lanes = bitpacking.BLOCK // t
    values = rng.integers(0, 1 << w, blocks * bitpacking.BLOCK, dtype=np.uint64, endpoint=False).astype(dtype)
    packed = bitpacking.pack(values, w).reshape(blocks, w * lanes)
    led = np.zeros((blocks, 1 + w * lanes), dtype)
    led[:, 1:] = packed
    gaps = rng.integers(1, 3, blocks)
    at = np.cumsum(gaps + w * lanes) - w * lanes
    spread = np.zeros(int(at[-1]) + w * lanes, dtype)
    for k in range(blocks):
        spread[at[k] : at[k] + w * lanes] = packed[k]
    return {
        "back": (packed.reshape(-1), None),
        "led": (led.reshape(-1), np.arange(blocks) * (1 + w * lanes) + 1),
        "gather": (spread, at),
    }


def _time(fn, runs: int) -> float:
    fn()
    out = []
    for _ in range(runs):
        c = time.thread_time()
        fn()
        out.append(time.thread_time() - c)
    return statistics.median(out)


def main(argv: list[str] | None = None) -> int:
    """Print ns per value for every type and width asked for."""
    p = argparse.ArgumentParser()
    p.add_argument("--types", default="8,16,32,64")
    p.add_argument("--widths", default="", help="comma-separated; default: every width 1..T")
    p.add_argument("--values", type=int, default=1 << 20)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--layouts", default="back,led,gather")
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    blocks = max(1, a.values // bitpacking.BLOCK)
    layouts = a.layouts.split(",")
    print(f"values={blocks * bitpacking.BLOCK} runs={a.runs} load={os.getloadavg()[0]:.2f}")
    print("   T   W " + " ".join(f"{name:>8s}" for name in layouts) + "  (ns/value)")
    summary: dict[str, list[float]] = {name: [] for name in layouts}
    for t in [int(x) for x in a.types.split(",")]:
        widths = [int(x) for x in a.widths.split(",")] if a.widths else list(range(1, t + 1))
        for w in widths:
            if w > t:
                continue
            inputs = _inputs(t, w, blocks, rng)
            out = np.empty(blocks * bitpacking.BLOCK, bitpacking.DTYPES[t])
            cells = []
            for name in layouts:
                words, at = inputs[name]
                s = _time(partial(bitpacking.unpack, words, t, w, blocks, at, out), a.runs)
                ns = s * 1e9 / out.size
                summary[name].append(ns)
                cells.append(f"{ns:8.2f}")
            print(f"  {t:2d}  {w:2d} " + " ".join(cells), flush=True)
    print("median " + " ".join(f"{statistics.median(v):8.2f}" for v in summary.values()))
    print(f"load={os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
