"""Write the corpus of tiny datasets made by older pylance releases (``tests/corpus/older_pylance``).

How to run it (from the repository root, with a Python 3.11 and access to the package index)::

    python3.11 scripts/make_older_pylance_corpus.py --venvs <a folder outside the repository>

For every release in ``RELEASES`` it creates a virtual environment ``<venvs>/venv-<release>`` (never the
project's own environment), installs that pylance with a pyarrow/numpy it works with, and runs this
same script inside it (``--write <release> <names> <out>``) to write the datasets of that release into
``tests/corpus/older_pylance/<release>/<name>/``. An existing release folder is replaced.
``--only 0.13.0`` limits the run to some releases. The tests compare every version of every dataset
with pylance 14 at test time; no expected values are stored.

Each dataset holds a few rows (int64, float64, string, list<int32>, list<string>, struct; with
nulls) and goes through six versions: create (two fragments), append, delete, compact (two versions:
reserve fragments, rewrite), delete again; and a tag on version 2 where the release has tags.
Releases with both file formats get one dataset per format.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

# release -> (extra requirements that make it import on Python 3.11, the datasets it writes).
# Datasets: "legacy" (0.1 files), "v2_0", "v2_1", "v2_0_v2paths" (2.0 with V2 manifest names).
# Left out: 0.10's experimental v2 writer (a pre-release format pylance 14 cannot read, and 0.10
# cannot delete from it), 0.16's "2.1" (2.0 files labelled 2.1, refused by pylance 14).
# 0.25's 2.1 is an unstable 2.1 that pylance 14 cannot read either: it is kept, to check both refuse.
RELEASES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "0.10.18": (["pyarrow<17", "numpy<2"], ("legacy",)),
    "0.13.0": (["pyarrow<17", "numpy<2"], ("legacy", "v2_0")),
    "0.16.1": (["pyarrow<17", "numpy<2"], ("legacy", "v2_0")),
    "0.19.2": ([], ("legacy", "v2_0", "v2_0_v2paths")),
    "0.25.2": ([], ("legacy", "v2_0", "v2_1", "v2_0_v2paths")),
    "0.33.0": ([], ("legacy", "v2_0", "v2_1", "v2_0_v2paths")),
}

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "older_pylance"


def _rows(start: int, n: int):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([None if i % 4 == 3 else i * 0.5 for i in ids], pa.float64()),
            "s": pa.array([None if i % 3 == 2 else f"s{i}" for i in ids], pa.string()),
            "l": pa.array([None if i % 5 == 4 else list(range(i % 3)) for i in ids], pa.list_(pa.int32())),
            "ls": pa.array([[f"x{i}"] * (i % 3) if i % 4 else None for i in ids], pa.list_(pa.string())),
            "st": pa.array(
                [{"a": i, "b": None if i % 2 else f"b{i}"} for i in ids],
                pa.struct([("a", pa.int32()), ("b", pa.string())]),
            ),
        }
    )


def _write_options(lance, name: str) -> dict:  # type: ignore[no-untyped-def]
    """write_dataset keyword arguments of a dataset, as this release spells the format choice."""
    params = inspect.signature(lance.write_dataset).parameters
    if "data_storage_version" in params:
        version = {"legacy": "legacy", "v2_0": "2.0", "v2_1": "2.1", "v2_0_v2paths": "2.0"}[name]
        out = {"data_storage_version": version}
        if name == "v2_0_v2paths":
            out["enable_v2_manifest_paths"] = True
        return out
    if "use_legacy_format" in params:
        return {"use_legacy_format": name == "legacy"}
    if name != "legacy":
        raise SystemExit(f"pylance {lance.__version__} cannot write {name}")
    return {}


def write_release(release: str, names: list[str], out: Path) -> None:
    """Write this release's datasets (run inside the release's environment)."""
    import lance

    if lance.__version__ != release:
        raise SystemExit(f"running pylance {lance.__version__}, expected {release}")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in names:
        kwargs = _write_options(lance, name)
        uri = str(out / name)
        lance.write_dataset(_rows(0, 6), uri, max_rows_per_file=3, **kwargs)  # v1: two fragments
        append = {k: v for k, v in kwargs.items() if k != "enable_v2_manifest_paths"}
        lance.write_dataset(_rows(6, 3), uri, mode="append", **append)  # v2
        ds = lance.dataset(uri)
        ds.delete("id = 1 OR id = 7")  # v3
        ds = lance.dataset(uri)
        ds.optimize.compact_files()  # v4
        ds = lance.dataset(uri)
        ds.delete("id = 4")  # v5: the latest version has a deletion file
        ds = lance.dataset(uri)
        if hasattr(ds, "tags"):
            ds.tags.create("second", 2)
        print(f"{release}/{name}: versions {[v['version'] for v in ds.versions()]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--venvs", type=Path, help="folder for one virtual environment per release")
    parser.add_argument("--only", nargs="*", help="releases to (re)write")
    parser.add_argument("--write", nargs=3, metavar=("RELEASE", "NAMES", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write_release(args.write[0], args.write[1].split(","), Path(args.write[2]))
        return
    if args.venvs is None:
        parser.error("--venvs is required")
    for release, (extra, names) in RELEASES.items():
        if args.only and release not in args.only:
            continue
        venv = args.venvs / f"venv-{release}"
        python = venv / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"pylance=={release}", *extra], check=True)
        subprocess.run(
            [str(python), __file__, "--write", release, ",".join(names), str(CORPUS / release)],
            check=True,
            env={**os.environ, "LANCE_LOG": "error"},
        )


if __name__ == "__main__":
    main()
