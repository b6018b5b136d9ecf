"""History benchmark: a living table of many small appends, lance_table vs pylance side by side.

Each library builds its own dataset (pylance's default format, 2.2) from ``--appends`` appends of
``--rows-per-append`` rows, then every scenario runs alternately on both, round by round, and the
medians and their ratio are reported. Scenarios that change the dataset run on a fresh copy each
round (the copy is not timed; files that are never rewritten are hard links, see ``--full-copies``).

Each scenario reports the median wall time and process CPU time of both sides, and the load
average. Scenarios are cold by default, as a fresh process runs them: every pylance call opens a
new dataset object (an empty session), and lance_table's process-wide caches are cleared
(``lance_table.table.session.clear_caches()``, untimed) before each of its calls -- the copies of a
changing scenario share files with the original through hard links, so kept readers would
otherwise serve them. Scenarios marked "(warm)" are a long-lived process: each side reuses one
dataset object it used before (pylance's session is then as warm as lance_table's caches).

With ``--history deletes`` the table (``--table-rows`` rows in fragments of
``--rows-per-append`` rows) is written once and each later version deletes one row (every 100th
overwrites the table with itself), so the table's size does not depend on ``--appends``. With
``--count-calls`` the calls lance_table makes of its storage layer (listings and the names they
return, reads and their bytes) are counted for a commit, an open, ``versions()`` and a delete, to
show which of them depend on the number of versions.

    python benchmarks/bench_history.py --appends 500
    python benchmarks/bench_history.py --appends 500 --columns events   # streamed records
    python benchmarks/bench_history.py --appends 5000 --runs 3 --count-calls
    python benchmarks/bench_history.py --history deletes --appends 5000 --runs 3 --count-calls
    python benchmarks/bench_history.py --appends 5000 --runs 1 --s3-requests

Building 5,000 appends took 37 s (lance_table) and 115 s (pylance) on a loaded 2-core machine
(load 12); 5,000 deletes and overwrites 178 s and 363 s (load 8). Build once with ``--keep DIR``
and measure again on the kept datasets (about 5 minutes at 5,000 versions with ``--runs 3``). A
5,000-append dataset holds about 820 MB of manifests per side (each lists every fragment so far).
A kept dataset's appends are not rebuilt, so "append N rows to the history" times one more append
(on a copy) at the history's full length.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, interleaved_result

import lance_table as lt
from lance_table.table.session import clear_caches

FORMAT = "2.2"


#: the columns of each append: "narrow" (id, x, s) or "events" (see :func:`_events`)
SHAPE = {"columns": "narrow"}
_CATEGORIES = np.array(["click", "view", "purchase", "signup", "logout"])


def _drain(ds: Any) -> int:
    """A stream of the whole table (``to_batches``), each batch dropped: the rows it held."""
    return sum(batch.num_rows for batch in ds.to_batches())


def _rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    if SHAPE["columns"] == "events":
        return _events(ids)
    return pa.table({"id": ids, "x": ids * 0.5, "s": pa.array([f"row-{i}" for i in ids.tolist()])})


def _events(ids: np.ndarray) -> pa.Table:
    """Records as a stream of events brings them: a timestamp, the load's id and source (one
    value per append), a category, a nullable flag, a struct payload and a list of tags."""
    n = ids.size
    rng = np.random.default_rng(int(ids[0]) if n else 0)
    load = int(ids[0]) // max(n, 1) if n else 0
    payload = pa.StructArray.from_arrays(
        [pa.array(ids * 3), pa.array([f"user-{i % 977}" for i in ids.tolist()])], ["user_id", "user"]
    )
    tags = pa.array([["a", "b", "c"][: i % 4] for i in ids.tolist()], pa.list_(pa.string()))
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(ids.astype("datetime64[ms]")),
            "load": pa.array(np.full(n, load, np.int64)),
            "source": pa.array([f"topic-{load % 3}"] * n),
            "category": pa.array(_CATEGORIES[rng.integers(0, 5, n)], mask=rng.random(n) < 0.1),
            "flag": pa.array(rng.random(n) < 0.5, mask=rng.random(n) < 0.1),
            "payload": payload,
            "tags": tags,
        }
    )


def _double_id(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The UDF of the add_columns scenario: twice the id."""
    import pyarrow.compute as pc

    return pa.record_batch([pc.multiply(batch.column("id"), 2)], ["y"])


def _build(
    side: str, uri: str, appends: int, size: int, history: str = "appends", table_rows: int = 50_000
) -> list[float]:
    """Create the dataset with ``appends`` commits; return the times of the last 50.

    ``history="appends"``: each commit appends ``size`` rows. ``"deletes"``: the table is written
    once (``appends * size`` rows in fragments of ``size`` rows), then each commit deletes one row,
    and every 100th overwrites the table with itself (as a reload would).
    """
    return [step() for step in _steps(side, uri, appends, size, history, table_rows)][-50:]


def _build_both(
    uris: tuple[str, str], appends: int, size: int, history: str, table_rows: int
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """:func:`_build` of both sides, commit by commit in turn (the side going first alternating),
    so that both see the same load of a shared machine; the (wall, CPU) times of every commit."""
    steps = (
        _steps("lance_table", uris[0], appends, size, history, table_rows),
        _steps("pylance", uris[1], appends, size, history, table_rows),
    )
    times: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
    for k, pair in enumerate(zip(*steps)):
        for side in (0, 1) if k % 2 == 0 else (1, 0):
            c0 = time.process_time()
            wall = pair[side]()
            times[side].append((wall, time.process_time() - c0))
        if k and k % 1000 == 0:
            print(f"  ... {k} commits, load {os.getloadavg()[0]:.1f}", flush=True)
    return times


def _steps(
    side: str, uri: str, appends: int, size: int, history: str, table_rows: int = 50_000
) -> list[Callable[[], float]]:
    """The commits that build a side's dataset, each a call returning its time."""
    import lance

    mod = lt if side == "lance_table" else lance

    def timed(fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        return run

    if history == "deletes":
        total = table_rows

        def first() -> None:
            mod.write_dataset(_rows(0, total), uri, max_rows_per_file=size, data_storage_version=FORMAT)

        def change(i: int) -> None:
            if i % 100 == 0:
                table = mod.dataset(uri).to_table()
                mod.write_dataset(table, uri, mode="overwrite", max_rows_per_file=size)
            else:
                mod.dataset(uri).delete(f"id = {(i * 7919) % total}")

        return [timed(first)] + [timed(lambda i=i: change(i)) for i in range(1, appends)]

    def append(i: int) -> None:
        data = _rows(i * size, size)
        mod.write_dataset(data, uri, mode="append" if i else "create", data_storage_version=FORMAT)

    return [timed(lambda i=i: append(i)) for i in range(appends)]


class CallCounts:
    """Counts of the calls lance_table makes of its local storage layer while installed: listings
    and the names they return, reads (whole files and ranges) and their bytes, writes."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._saved: dict[str, Callable[..., object]] = {}

    def _add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def __enter__(self) -> CallCounts:
        from lance_table.storage.local import LocalStorage

        def wrap(name: str, count: Callable[[object], None]) -> None:
            original = getattr(LocalStorage, name)
            self._saved[name] = original

            def call(storage: object, *args: object, **kwargs: object) -> object:
                out = original(storage, *args, **kwargs)
                self._add(name)
                count(out)
                return out

            setattr(LocalStorage, name, call)

        def names(out: object) -> None:
            self._add("names listed", len(out))  # type: ignore[arg-type]

        def nbytes(out: object) -> None:
            self._add("bytes read", len(out))  # type: ignore[arg-type]

        def range_bytes(out: object) -> None:
            self._add("bytes read", sum(len(b) for b in out))  # type: ignore[attr-defined]

        wrap("list_dir", names)
        wrap("list_names", names)
        wrap("list_tree", names)
        wrap("read", nbytes)
        wrap("read_ranges", range_bytes)
        for name in ("size", "exists", "write", "write_new", "put_if_absent", "source", "delete"):
            wrap(name, lambda out: None)
        return self

    def __exit__(self, *exc: object) -> None:
        from lance_table.storage.local import LocalStorage

        for name, original in self._saved.items():
            setattr(LocalStorage, name, original)


def _count_calls(uri: str, size: int, lo: int) -> dict[str, dict[str, int]]:
    """The storage calls of a commit (an append), an open, ``versions()`` and a delete on a copy
    of the dataset at ``uri``, each from a fresh process state (caches cleared)."""
    copy = f"{uri}-count"
    shutil.rmtree(copy, ignore_errors=True)
    _copy_dataset(uri, copy)
    out: dict[str, dict[str, int]] = {}
    actions: list[tuple[str, Callable[[], object]]] = [
        ("append (a commit)", lambda: lt.write_dataset(_rows(10**9, size), copy, mode="append")),
        ("open latest", lambda: lt.dataset(copy)),
        ("open version 1", lambda: lt.dataset(copy, version=1)),
        ("versions()", lambda: lt.dataset(copy).versions()),
        ("delete 1 row", lambda: lt.dataset(copy).delete(f"id = {lo}")),
    ]
    try:
        for name, action in actions:
            _clear_caches()
            with CallCounts() as counter:
                action()
            out[name] = counter.counts
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return out


def _remote_actions(
    mod: Any, remote: str, options: dict[str, str], size: int
) -> list[tuple[str, Callable[[], object]]]:
    """The history-bound calls of one library (``mod``) on a dataset in object storage (the
    cleanup last: it removes the history)."""
    return [
        ("open latest", lambda: mod.dataset(remote, storage_options=options)),
        ("open version 1", lambda: mod.dataset(remote, version=1, storage_options=options)),
        ("versions()", lambda: mod.dataset(remote, storage_options=options).versions()),
        (
            "append (a commit)",
            lambda: mod.write_dataset(_rows(10**9, size), remote, mode="append", storage_options=options),
        ),
        (
            "cleanup (all but latest)",
            lambda: mod.dataset(remote, storage_options=options).cleanup_old_versions(
                older_than=dt.timedelta(0)
            ),
        ),
    ]


def _s3_requests(uris: tuple[str, str], size: int) -> dict[str, dict[str, dict[str, int]]]:
    """The requests each side sends to an S3 server (moto, in a subprocess) for a commit (an
    append), an open of the latest version and of version 1, ``versions()`` and a cleanup: each side's
    manifests (``_versions``, all of the history) are uploaded first (the data files are not: none
    of these reads them)."""
    import lance
    import s3fs
    from slow_s3 import SlowS3

    out: dict[str, dict[str, dict[str, int]]] = {}
    with SlowS3(0.0) as server:
        options = server.storage_options
        fs = s3fs.S3FileSystem(key="bench", secret="bench", client_kwargs={"endpoint_url": server.endpoint})
        fs.mkdir("history")
        for side, uri in zip(("lance_table", "pylance"), uris):
            start = time.perf_counter()
            fs.put(f"{uri}/_versions", f"history/{side}/_versions", recursive=True)
            print(f"  uploaded {side}'s manifests in {time.perf_counter() - start:.0f} s", flush=True)
        for side in ("lance_table", "pylance"):
            mod: Any = lt if side == "lance_table" else lance
            remote = f"s3://history/{side}"
            actions = _remote_actions(mod, remote, options, size)
            for name, action in actions:
                clear_caches()
                server.counts(reset=True)
                try:
                    action()
                except Exception as exc:  # a side that cannot do it is reported, not fatal
                    print(f"  {side} {name}: {type(exc).__name__}: {exc}", flush=True)
                out.setdefault(name, {})[side] = dict(server.counts(reset=True))
    return out


#: files that neither library ever writes again once written (each is new under its own name):
#: a copy of a dataset may share them with the original (hard links) instead of copying their bytes
_WRITTEN_ONCE = ("data", "_deletions", "_transactions", "_indices")


def _copy_dataset(src: str, dst: str, links: bool = True) -> None:
    """A copy of the dataset at ``src`` for a scenario that changes it. With ``links``, the files
    that are never rewritten in place (data, deletion and transaction files, manifests) are hard
    links to the original's -- the same bytes and the same cached pages for either library, at no
    cost of copying hundreds of MB of manifests each round -- and every other file (the latest
    version hint, which lance_table rewrites in place; tags and branches) is copied."""
    if not links:
        shutil.copytree(src, dst)
        return

    def copy(path: str, target: str) -> object:
        rel = os.path.relpath(path, src)
        top = rel.split(os.sep, 1)[0]
        if top in _WRITTEN_ONCE or (top == "_versions" and rel.endswith(".manifest")):
            os.link(path, target)
            return target
        return shutil.copy2(path, target)

    shutil.copytree(src, dst, copy_function=copy)


def _file_states(root: str) -> dict[str, tuple[int, int]]:
    """Each file's size and modification time under ``root`` (to check that no scenario wrote
    through a hard link into the dataset it copied)."""
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            st = os.stat(os.path.join(folder, name))
            out[os.path.join(folder, name)] = (st.st_size, st.st_mtime_ns)
    return out


def _clear_caches() -> None:
    """Forget what lance_table keeps between calls in this process (so each count starts cold)."""
    clear_caches()


def main() -> None:
    parser = argument_parser(__doc__, runs=5)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--rows-per-append", type=int, default=100)
    parser.add_argument("--history", choices=["appends", "deletes"], default="appends")
    parser.add_argument("--table-rows", type=int, default=50_000, help="rows of the --history deletes table")
    parser.add_argument("--count-calls", action="store_true")
    parser.add_argument(
        "--columns",
        choices=["narrow", "events"],
        default="narrow",
        help="narrow: id, x, s; events: timestamps, constant load columns, a category, a nullable flag, "
        "a struct and a list of strings",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="build the datasets in this directory and keep them; reuse them when already built there",
    )
    parser.add_argument(
        "--only", help="run only the scenarios whose names contain one of these comma-separated words"
    )
    parser.add_argument(
        "--full-copies",
        action="store_true",
        help="copy every byte of a dataset for the scenarios that change it (default: files that are "
        "never rewritten are hard links to the original's)",
    )
    parser.add_argument(
        "--s3-requests", action="store_true", help="count both sides' requests to a moto S3 server"
    )
    args = parser.parse_args()
    SHAPE["columns"] = args.columns
    import lance

    n, size = args.appends, args.rows_per_append
    what = f"{n} appends of {size} rows" if args.history == "appends" else f"{n} deletes and overwrites"
    report = Report(
        f"History: {what} (format {FORMAT})",
        {
            "commits": n,
            "rows_per_append": size,
            "history": args.history,
            "runs": args.runs,
            "columns": args.columns,
        }
        | ({"table_rows": args.table_rows} if args.history == "deletes" else {}),
    )
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-history-"))
    uris = (str(root / "ours"), str(root / "theirs"))
    reused = args.keep is not None and all(Path(u, "_versions").is_dir() for u in uris)
    try:
        if reused:
            print(f"reusing the datasets in {root}", flush=True)
            built: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
        else:
            print(f"building two datasets of {what} ...", flush=True)
            start = time.perf_counter()
            built = _build_both(uris, n, size, args.history, args.table_rows)
            print(f"built in {time.perf_counter() - start:.0f} s", flush=True)
        med = statistics.median
        for label, part in (("first 50", slice(0, 50)), ("last 50", slice(-50, None))) if built[0] else ():
            ours, theirs = built[0][part], built[1][part]
            report.add(
                Result(
                    (f"append {size} rows" if args.history == "appends" else "delete/overwrite")
                    + f" ({label})",
                    med(t[0] for t in ours),
                    med(t[0] for t in theirs),
                    50,
                    "",
                    med(t[1] for t in ours),
                    med(t[1] for t in theirs),
                    os.getloadavg()[0],
                )
            )
        if built[0]:
            report.add(
                Result(
                    f"build: all {n} commits (total)",
                    sum(t[0] for t in built[0]),
                    sum(t[0] for t in built[1]),
                    1,
                    "generation time of each side's dataset",
                    sum(t[1] for t in built[0]),
                    sum(t[1] for t in built[1]),
                    os.getloadavg()[0],
                )
            )
        total = n * size if args.history == "appends" else args.table_rows
        lo = total // 2 + 1

        wanted = [w.strip() for w in args.only.split(",")] if args.only else None

        def both(
            name: str,
            mine: Callable[[str], object],
            theirs: Callable[[str], object],
            fresh: bool = False,
            cold: bool = True,
        ) -> None:
            """``mine`` and ``theirs`` side by side; with ``cold`` (a fresh process's call), every
            cache lance_table keeps in the process is cleared before each of its calls (untimed),
            as each pylance call opens a new dataset object with a new, empty session."""
            if wanted is not None and not any(w in name for w in wanted):
                return
            current = list(uris)

            def setup(side: int) -> None:
                if fresh:
                    copy = f"{uris[side]}-copy"
                    shutil.rmtree(copy, ignore_errors=True)
                    _copy_dataset(uris[side], copy, links=not args.full_copies)
                    current[side] = copy
                if cold and side == 0:
                    clear_caches()

            result = interleaved_result(
                name, lambda: mine(current[0]), lambda: theirs(current[1]), args.runs, setup=setup
            )
            slowest = max(result.lance_table_s, result.pylance_s)
            if not fresh and slowest < 0.05:
                # a cheap read: more rounds (about a second per side), as a median of 3 or 5
                # sub-millisecond calls on a shared machine is mostly noise
                runs = min(41, max(args.runs, int(1.0 / max(slowest, 1e-4))))
                result = interleaved_result(
                    name, lambda: mine(current[0]), lambda: theirs(current[1]), runs, setup=setup
                )
            report.add(result)

        def warm(
            name: str,
            mine: Callable[[Any], object],
            theirs: Callable[[Any], object],
            fresh: bool = False,
        ) -> None:
            """A long-lived process: each side calls on one dataset object it opened and used
            before (untimed: the same call once, or with ``fresh``, on a new copy of the dataset,
            a read of the rows the change touches), so pylance's session cache is as warm as
            lance_table's process caches."""
            name = f"{name} (warm)"
            if wanted is not None and not any(w in name for w in wanted):
                return
            opened: list[Any] = [lt.dataset(uris[0]), lance.dataset(uris[1])]
            slowest = 0.0
            if not fresh:
                for call, ds in ((mine, opened[0]), (theirs, opened[1])):
                    start = time.perf_counter()
                    call(ds)
                    slowest = max(slowest, time.perf_counter() - start)

            def setup(side: int) -> None:
                if not fresh:
                    return
                copy = f"{uris[side]}-copy"
                shutil.rmtree(copy, ignore_errors=True)
                _copy_dataset(uris[side], copy, links=not args.full_copies)
                if side == 0:
                    clear_caches()  # (entries of the original's files would serve its hard links)
                opened[side] = (lt.dataset if side == 0 else lance.dataset)(copy)
                opened[side].to_table(filter=flt)

            # more rounds for a cheap read; a slow one (pylance's versions() at 5,000 versions takes
            # about 40 s a call) gets --runs
            runs = args.runs if fresh or slowest > 1.0 else max(args.runs, 11)
            result = interleaved_result(
                name, lambda: mine(opened[0]), lambda: theirs(opened[1]), runs, setup=setup
            )
            report.add(result)

        flt = f"id >= {lo} AND id < {lo + 100}"
        before = [_file_states(u) for u in uris]
        both("open latest", lambda u: lt.dataset(u), lambda u: lance.dataset(u))
        both("open version 1", lambda u: lt.dataset(u, version=1), lambda u: lance.dataset(u, version=1))
        both("versions()", lambda u: lt.dataset(u).versions(), lambda u: lance.dataset(u).versions())
        warm("versions()", lambda d: d.versions(), lambda d: d.versions())
        both("count rows", lambda u: lt.dataset(u).count_rows(), lambda u: lance.dataset(u).count_rows())
        both("full scan", lambda u: lt.dataset(u).to_table(), lambda u: lance.dataset(u).to_table())
        both("stream scan (to_batches)", lambda u: _drain(lt.dataset(u)), lambda u: _drain(lance.dataset(u)))
        both(
            "filter 100-row id range",
            lambda u: lt.dataset(u).to_table(filter=flt),
            lambda u: lance.dataset(u).to_table(filter=flt),
        )
        live = lt.dataset(uris[0]).count_rows()  # fewer than ``total`` once rows were deleted
        assert live == lance.dataset(uris[1]).count_rows()
        picks = np.random.default_rng(1).choice(live, 100, replace=False).tolist()
        both("take 100 rows", lambda u: lt.dataset(u).take(picks), lambda u: lance.dataset(u).take(picks))
        warm("count rows", lambda d: d.count_rows(), lambda d: d.count_rows())
        warm("full scan", lambda d: d.to_table(), lambda d: d.to_table())
        warm("stream scan (to_batches)", _drain, _drain)
        warm("filter 100-row id range", lambda d: d.to_table(filter=flt), lambda d: d.to_table(filter=flt))
        warm("take 100 rows", lambda d: d.take(picks), lambda d: d.take(picks))
        extra = _rows(total, size)  # new ids after the table's
        both(
            f"append {size} rows to the history",
            lambda u: lt.write_dataset(extra, u, mode="append"),
            lambda u: lance.write_dataset(extra, u, mode="append"),
            fresh=True,
        )
        warm("delete 1 row", lambda d: d.delete(f"id = {lo}"), lambda d: d.delete(f"id = {lo}"), fresh=True)
        both(
            "delete 1 row",
            lambda u: lt.dataset(u).delete(f"id = {lo}"),
            lambda u: lance.dataset(u).delete(f"id = {lo}"),
            fresh=True,
        )
        both(
            "compaction",
            lambda u: lt.dataset(u).compact_files(),
            lambda u: lance.dataset(u).optimize.compact_files(),
            fresh=True,
        )
        copy = "try_binary_copy"  # pages copied as they are where no fragment has deletions
        both(
            "compaction (binary copy)",
            lambda u: lt.dataset(u).compact_files(compaction_mode=copy),
            lambda u: lance.dataset(u).optimize.compact_files(compaction_mode=copy),
            fresh=True,
        )
        # new columns on every fragment: a file written per fragment (read only "id": both shapes)
        both(
            "add_columns SQL {'y': 'id * 2'}",
            lambda u: lt.dataset(u).add_columns({"y": "id * 2"}),
            lambda u: lance.dataset(u).add_columns({"y": "id * 2"}),
            fresh=True,
        )
        both(
            "add_columns UDF (id -> y)",
            lambda u: lt.dataset(u).add_columns(_double_id, read_columns=["id"]),
            lambda u: lance.dataset(u).add_columns(_double_id, read_columns=["id"]),
            fresh=True,
        )
        keyed = pa.table({"id": np.arange(total, dtype=np.int64), "y": np.arange(total, dtype=np.float64)})
        both(
            "merge a column by key (id)",
            lambda u: lt.dataset(u).merge(keyed, left_on="id"),
            lambda u: lance.dataset(u).merge(keyed, left_on="id"),
            fresh=True,
        )
        zero = dt.timedelta(0)
        both(
            "cleanup (all but latest)",
            lambda u: lt.dataset(u).cleanup_old_versions(older_than=zero),
            lambda u: lance.dataset(u).cleanup_old_versions(older_than=zero),
            fresh=True,
        )
        both(
            "restore version 1",
            lambda u: lt.dataset(u, version=1).restore(),
            lambda u: lance.dataset(u, version=1).restore(),
            fresh=True,
        )
        both(
            "tag creation",
            lambda u: lt.dataset(u).tags.create("t", 1),
            lambda u: lance.dataset(u).tags.create("t", 1),
            fresh=True,
        )
        if args.count_calls:
            counts = _count_calls(uris[0], size, lo)
            lines = [f"### lance_table's storage calls at {n} versions", ""]
            lines += [
                f"- {name}: " + ", ".join(f"{k} {v}" for k, v in c.items()) for name, c in counts.items()
            ]
            print("\n".join(lines), flush=True)
            (args.out / f"history_{args.history}_{n}_calls.json").parent.mkdir(parents=True, exist_ok=True)
            (args.out / f"history_{args.history}_{n}_calls.json").write_text(json.dumps(counts, indent=2))
        if args.s3_requests:
            requests = _s3_requests(uris, size)
            print(f"### requests to S3 at {n} versions (lance_table / pylance)", flush=True)
            for name, sides in requests.items():
                print(f"- {name}: {sides.get('lance_table')} / {sides.get('pylance')}", flush=True)
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"history_{args.history}_{n}_s3.json").write_text(json.dumps(requests, indent=2))
        if [_file_states(u) for u in uris] != before:  # a scenario wrote through a hard link
            raise RuntimeError("a dataset changed under the benchmark: rerun with --full-copies")
        report.publish(args.out, f"history_{args.history}_{n}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
        for uri in uris:  # the copies the changing scenarios ran on
            shutil.rmtree(f"{uri}-copy", ignore_errors=True)


if __name__ == "__main__":
    main()
