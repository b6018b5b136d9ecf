"""Run pylance's own upstream Python tests against pylance and against lance_table, and triage.

Usage::

    python scripts/upstream_tests.py UPSTREAM [--rev HEAD] [--modules test_dataset,test_file,...]
        [--timeout 120] [--report triage.md] [--json outcomes.json] [--keep DIR]

``UPSTREAM`` is a checkout of https://github.com/lancedb/lance or its git directory (bare or not):
the test modules are read from ``python/python/tests`` (with ``test_data/``, which some tests read)
and extracted into a temporary directory for the run; no upstream code is kept in this repository.

The chosen modules run twice with pytest, in two processes at once:

1. with pylance, installed as ``lance``;
2. with a shim package named ``lance`` first on ``sys.path``, generated at run time: one module per
   pylance module, whose names resolve to lance_table's (``lance.dataset(...)``,
   ``lance.fragment.LanceFragment``, ``lance.file.LanceFileReader``, ...; see
   ``scripts/upstream_shim/_lt_shim.py``). A name lance_table lacks is a placeholder that raises
   ``MissingInLanceTable`` when used, so a test fails on it and the triage names it.

The report counts the tests that pass with pylance (tests needing what is not installed, the network
or newer pylance fail there and drop out), how many of those pass with lance_table, per module, and
ranks the failure causes (exception type and message, normalized) by how many tests each blocks.
Tests about indices and vector search are deselected by name (``--keyword``; issue 29's scope).
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from upstream_shim.triage import triage

ROOT = Path(__file__).resolve().parents[1]
SHIM_SUPPORT = Path(__file__).resolve().parent / "upstream_shim"
TESTS = "python/python/tests"
MARKER = ".upstream-tests"
DEFAULT_MODULES = (
    "test_dataset",
    "test_fragment",
    "test_file",
    "test_filter",
    "test_optimize",
    "test_schema_evolution",
    "test_table_ops",
    "test_schema",
    "test_lance",
    "test_json",
    "test_arrow",
    "test_blob",
    "test_migration",
    "test_order_by",
    "test_ingestion",
    "test_multi_base",
    "test_backwards_compatibility",
)
# Out of issue 29's scope: indices, vector and full-text search.
DEFAULT_KEYWORD = " and ".join(
    f"not {word}"
    for word in [
        "nearest",
        "vector_search",
        "fts",
        "ivf",
        "hnsw",
        "knn",
        "prefilter",
        "create_index",
        "index_scan",
        "use_index",
        "empty_index",
        "index_rows",
        "scalar_index",
        "index_remapping",
        "index_after",
        "after_index",
        "index_no_details",
        "bitmap_indices",
    ]
)
# pylance modules the shim provides when pylance is not installed to list them from.
FALLBACK_PYLANCE_MODULES = [
    "lance.arrow",
    "lance.blob",
    "lance.commit",
    "lance.dataset",
    "lance.debug",
    "lance.dependencies",
    "lance.file",
    "lance.fragment",
    "lance.io",
    "lance.lance",
    "lance.log",
    "lance.optimize",
    "lance.progress",
    "lance.schema",
    "lance.types",
    "lance.udf",
    "lance.util",
    "lance.vector",
    "lance._dataset",
    "lance._dataset.sharded_batch_iterator",
]

# ----- extraction -----------------------------------------------------------------------------------


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def extract(upstream: Path, rev: str, modules: list[str], dest: Path) -> str:
    """Copy the chosen test modules, their helpers and ``test_data`` under ``dest``; return the commit."""
    files = [f"{TESTS}/{m}.py" for m in modules] + [f"{TESTS}/conftest.py", f"{TESTS}/helper.py"]
    trees = [f"{TESTS}/historical_datasets", f"{TESTS}/images", "test_data"]
    if (upstream / TESTS).is_dir():
        for rel in files:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(upstream / rel, dest / rel)
        for rel in trees:
            if (upstream / rel).is_dir():
                shutil.copytree(upstream / rel, dest / rel)
        git_dir = upstream / ".git"
        if not git_dir.exists():
            return "unknown (not a git checkout)"
        return _git(git_dir, "rev-parse", "HEAD").decode().strip()
    commit = _git(upstream, "rev-parse", rev).decode().strip()
    listed = _git(upstream, "ls-tree", "-r", "--name-only", commit, "--", *trees).decode().splitlines()
    for rel in files + listed:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_git(upstream, "show", f"{commit}:{rel}"))
    return commit


def missing_top_level_imports(test_files: list[Path], deps: list[Path]) -> set[str]:
    """Third-party modules imported at the top of the test modules that are not installed."""
    missing = set()
    for path in test_files:
        for node in ast.parse(path.read_text()).body:
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in ("lance", "helper") or importlib.util.find_spec(top) is not None:
                    continue
                if not any(importlib.machinery.PathFinder.find_spec(top, [str(d)]) for d in deps):
                    missing.add(top)
    return missing


# ----- the shim -------------------------------------------------------------------------------------


def pylance_modules() -> list[str]:
    """The module names of the installed pylance (without importing it), else a fixed list."""
    spec = importlib.util.find_spec("lance")
    if spec is None or not spec.submodule_search_locations:
        return list(FALLBACK_PYLANCE_MODULES)
    base = Path(next(iter(spec.submodule_search_locations)))
    names = set()
    for path in base.rglob("*"):
        rel = path.relative_to(base)
        if "__pycache__" in rel.parts or rel.name == "conftest.py":
            continue
        if path.suffix == ".py" or path.name.endswith(".so"):
            parts = [*rel.parts[:-1], rel.name.split(".")[0]]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and all(p.isidentifier() for p in parts):
                names.add(".".join(["lance", *parts]))
    return sorted(names)


def write_shim(dest: Path, modules: list[str]) -> None:
    """Generate the ``lance`` package that maps pylance's module names onto lance_table."""
    package = dest / "lance"
    packages = {m.rsplit(".", 1)[0] for m in modules if "." in m} - {"lance"}
    for name in modules:
        rel = Path(*name.split(".")[1:])
        path = package / rel / "__init__.py" if name in packages else package / f"{rel}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"import _lt_shim\n\n_lt_shim.install({name!r})\n")
    init = f"import _lt_shim\n\n_lt_shim.install_package({modules!r})\n"
    (package / "__init__.py").write_text(init)


def write_stubs(dest: Path, dependencies: set[str]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in dependencies:
        (dest / f"{name}.py").write_text(f"import _lt_shim\n\n_lt_shim.install_stub({name!r})\n")


# ----- running --------------------------------------------------------------------------------------


def run_pass(
    label: str, work: Path, test_files: list[Path], path: list[Path], keyword: str, timeout: float
) -> dict[str, Any]:
    """Run the tests once; after a crash or hang, run the tests not yet run. Return outcomes."""
    results = work / f"{label}.jsonl"
    deselect = work / f"{label}.deselect"
    deselect.write_text("")
    run_dir = work / f"run-{label}"  # each pass its own working and temporary directories
    run_dir.mkdir()
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(str(p) for p in path),
        UPSTREAM_RESULTS=str(results),
        UPSTREAM_TIMEOUT=str(timeout),
        UPSTREAM_DESELECT=str(deselect),
        PYTHONDONTWRITEBYTECODE="1",
    )
    outcomes: dict[str, dict[str, Any]] = {}
    collect_errors: dict[str, str] = {}
    import_uses: dict[str, None] = {}
    for _attempt in range(50):
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "upstream_plugin"]
        command += ["-c", str(work / "pytest.ini"), "--rootdir", str(work), "-q", "--no-header"]
        command += ["--continue-on-collection-errors"]
        command += ["--basetemp", str(run_dir / "tmp"), "-k", keyword, *map(str, test_files)]
        log = (work / f"{label}.log").open("a")
        subprocess.run(command, cwd=run_dir, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        log.close()
        started, finished = None, False
        for line in results.read_text().splitlines():
            record = json.loads(line)
            if record["kind"] == "start":
                started = record["nodeid"]
            elif record["kind"] == "result":
                outcomes[record.pop("nodeid")] = record
                started = None
            elif record["kind"] == "collect":
                collect_errors[record["nodeid"]] = record["error"]
            elif record["kind"] == "import_use":
                import_uses[record["name"]] = None
            elif record["kind"] == "finished":
                finished = True
        if finished or started is None:
            break
        outcomes[started] = {"outcome": "failed", "type": "Crash", "message": "the process died or hung"}
        deselect.write_text("\n".join(outcomes))
        results.write_text("")
    prefix = f"src/{TESTS}/"
    return {
        "outcomes": {n.removeprefix(prefix): r for n, r in outcomes.items()},
        "collect_errors": {n.removeprefix(prefix): e for n, e in collect_errors.items()},
        "import_uses": list(import_uses),
    }


# ----- main -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("upstream", type=Path, help="lancedb/lance checkout or git directory")
    parser.add_argument("--rev", default="HEAD", help="commit to read from a git directory")
    parser.add_argument("--modules", default=",".join(DEFAULT_MODULES), help="comma-separated")
    parser.add_argument("--keyword", default=DEFAULT_KEYWORD, help="pytest -k expression")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    parser.add_argument("--pylance-timeout", type=float, default=600.0, help="seconds per test with pylance")
    parser.add_argument("--top", type=int, default=25, help="failure causes to list")
    parser.add_argument("--report", type=Path, help="write the markdown triage here (else stdout)")
    parser.add_argument("--json", type=Path, help="write every outcome and cause here")
    parser.add_argument(
        "--deps",
        type=Path,
        action="append",
        default=[],
        help="extra site directory for optional test dependencies, both passes\n"
        "(pip install --target DIR tqdm polars ml_dtypes); without it, test modules\n"
        "importing tqdm through lance.vector fail to import with pylance and drop out",
    )
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)

    modules = [m.strip().removesuffix(".py") for m in args.modules.split(",") if m.strip()]
    work = args.keep or Path(tempfile.mkdtemp(prefix="upstream-tests-"))
    if args.keep and work.exists() and any(work.iterdir()):
        if not (work / MARKER).exists():
            parser.error(f"--keep {work}: not empty and not a directory of an earlier run")
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    (work / MARKER).write_text("work directory of scripts/upstream_tests.py\n")
    try:
        commit = extract(args.upstream.resolve(), args.rev, modules, work / "src")
        tests_dir = work / "src" / TESTS
        test_files = [tests_dir / f"{m}.py" for m in modules]
        deps = [d.resolve() for d in args.deps]
        stubs = missing_top_level_imports(test_files, deps)
        write_stubs(work / "stubs", stubs)
        write_shim(work / "shim", pylance_modules())
        (work / "pytest.ini").write_text("[pytest]\naddopts = -p no:randomly\n")
        common = [work / "stubs", SHIM_SUPPORT, *deps]
        passes = {
            "pylance": [*common],
            "lance_table": [work / "shim", *common, ROOT],
        }
        runs: dict[str, dict[str, Any]] = {}

        def one(label: str) -> None:
            timeout = args.pylance_timeout if label == "pylance" else args.timeout
            runs[label] = run_pass(label, work, test_files, passes[label], args.keyword, timeout)

        threads = [threading.Thread(target=one, args=(label,)) for label in passes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        pylance_version = subprocess.run(
            [sys.executable, "-c", "import lance; print(lance.__version__)"],
            capture_output=True,
            text=True,
            check=False,
            cwd=work,
        ).stdout.strip()

        def git_head(*args: str) -> str:
            command = ["git", "-C", str(ROOT), "log", "-1", "--format=%h", *args]
            return subprocess.run(command, capture_output=True, text=True).stdout.strip()

        head = f"{git_head()} (lance_table/ last changed in {git_head('--', 'lance_table')})"
        meta = {
            "commit": commit,
            "pylance": pylance_version or "not installed",
            "lance_table": head,
            "modules": modules,
            "keyword": args.keyword,
            "timeout": args.timeout,
            "pylance_timeout": args.pylance_timeout,
            "stubs": sorted(stubs),
            "deps": sorted(p.name for d in deps for p in d.glob("*.dist-info")),
        }
        report, summary = triage(runs, meta, args.top)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.report:
        args.report.write_text(report)
    else:
        sys.stdout.write(report)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    print(
        f"{summary['pass_lance_table']} of {summary['pass_pylance']} upstream tests that pass with "
        f"pylance pass with lance_table",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
