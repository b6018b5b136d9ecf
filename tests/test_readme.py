"""The README's code runs: every ```python block marked ``<!-- snippet: NAME -->`` is executed with
the setup NAME below (blocks of one name share a namespace, in order), and the main example's
command runs ``examples/quickstart.py``.

Setups give a snippet the names it uses but does not define (``table``, ``ds``, ...) and stand in a
temporary directory for the paths it names (``/data/events``), then check what the snippet did.
"""

from __future__ import annotations

import datetime
import pickle
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_table as lt

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
MARK = re.compile(r"<!-- snippet: ([\w-]+) -->\s*\n```python\n(.*?)```", re.S)


def snippets() -> dict[str, list[str]]:
    """The marked blocks of the README, by setup name, in order."""
    found: dict[str, list[str]] = {}
    for name, code in MARK.findall(README.read_text()):
        found.setdefault(name, []).append(code)
    return found


def _events(start: int, n: int) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "score": pa.array([(i * 37 % 100) / 100 for i in range(start, start + n)]),
            "kind": pa.array([("click", "view", "buy")[i % 3] for i in range(start, start + n)]),
            "s": pa.StructArray.from_arrays([ids], names=["x"]),
        }
    )


def _datasets(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    names = {
        "table": _events(0, 300),
        "more_batches": _events(300, 100).to_batches(max_chunksize=40),
        "more_rows": _events(400, 10),
        "new_rows": _events(395, 10),
        "datetime": datetime,
        "pickle": pickle,
    }
    return names, {"/data/events": str(tmp / "events")}


def _check_datasets(ns: dict[str, Any], tmp: Path) -> None:
    ds = lt.dataset(str(tmp / "events"))
    ids = ds.to_table(columns=["id"])["id"].to_pylist()
    assert sorted(ids) == sorted(set(ids))  # the upsert left no duplicate keys
    assert set(range(400, 410)) <= set(ids)  # the insert and the upsert's new rows
    assert ds.config()["owner"] == "etl"
    tagged = ns["ds"].tags.list()["clean"]["version"]
    assert lt.dataset(str(tmp / "events"), version="clean").version == tagged


def _scanning(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    ds = lt.write_dataset(_events(0, 500), str(tmp / "scan"))
    ds.delete("id % 7 = 0")
    return {"ds": ds, "row_ids": ds.to_table(columns=["_rowid"], limit=5)["_rowid"].to_pylist()}, {}


def _fragments(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    import json

    from lance_table.fragment import write_fragments

    uri = str(tmp / "frags")
    lt.write_dataset(_events(0, 100), uri)
    # what the other workers sent the driver
    payloads = [json.dumps(m.to_json()) for m in write_fragments(_events(100, 50), uri)]
    return {"uri": uri, "batch_table": _events(150, 50), "payloads": payloads, "read_version": 1}, {}


def _check_fragments(ns: dict[str, Any], tmp: Path) -> None:
    assert sorted(lt.dataset(str(tmp / "frags")).to_table()["id"].to_pylist()) == list(range(150))


def _codec(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    return {}, {}


def _check_codec(ns: dict[str, Any], tmp: Path) -> None:
    assert ns["reader"].take([2, 0, 2]).column("id").to_pylist() == [3, 1, 3]


def _pylance_users(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    return {"table": _events(0, 100)}, {"/data/events": str(tmp / "events"), "/data/": f"{tmp}/"}


def _check_pylance_users(ns: dict[str, Any], tmp: Path) -> None:
    assert lt.dataset(str(tmp / "events")).count_rows() == 90


def _pandas(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    return {}, {"/data/people": str(tmp / "people")}


def _check_pandas(ns: dict[str, Any], tmp: Path) -> None:
    assert sorted(lt.dataset(str(tmp / "people")).to_table()["id"].to_pylist()) == [1, 2, 3, 4, 5, 6]


def _progress(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    ds = lt.write_dataset(_events(0, 100), str(tmp / "events"), max_rows_per_file=30)
    return {"ds": ds, "table": _events(100, 50)}, {"/data/events": str(tmp / "events")}


def _check_progress(ns: dict[str, Any], tmp: Path) -> None:
    last = ns["events"][-1]
    assert (last.operation, last.event, last.rows, last.rows_total) == ("write", "complete", 50, 50)
    ds = lt.dataset(str(tmp / "events"))
    assert ds.count_rows() == 150 and len(ds.get_fragments()) == 2  # the first 4 fragments compacted


def _ecosystem(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    return {}, {"/data/ecosystem": str(tmp / "ecosystem")}


def _check_ecosystem(ns: dict[str, Any], tmp: Path) -> None:
    assert ns["by_cat"] == [("a", 2), ("b", 1)]
    assert ns["frame"].to_dicts() == [{"cat": "a", "x": 0.05}, {"cat": "b", "x": 0.02}]
    assert ns["table"] == lt.dataset(str(tmp / "ecosystem")).to_table()


def _changes(tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    lt.write_dataset(_events(0, 10), str(tmp / "events"), enable_stable_row_ids=True)
    return {}, {"/data/events": str(tmp / "events")}


def _check_changes(ns: dict[str, Any], tmp: Path) -> None:
    rows = ns["ds"].table_changes(ns["before"] + 1).read_all().to_pylist()
    assert sorted((r["_change_type"], r["id"], r["score"]) for r in rows if r["id"] == 1) == [
        ("update_postimage", 1, 0.0),
        ("update_preimage", 1, 0.37),
    ]
    assert len(rows) == 6


Setup = Callable[[Path], tuple[dict[str, Any], dict[str, str]]]
SETUPS: dict[str, tuple[Setup, Callable[[dict[str, Any], Path], None]]] = {
    "datasets": (_datasets, _check_datasets),
    "scanning": (_scanning, lambda ns, tmp: None),
    "fragments": (_fragments, _check_fragments),
    "codec": (_codec, _check_codec),
    "pylance-users": (_pylance_users, _check_pylance_users),
    "pandas": (_pandas, _check_pandas),
    "progress": (_progress, _check_progress),
    "ecosystem": (_ecosystem, _check_ecosystem),
    "changes": (_changes, _check_changes),
}


def test_every_marked_snippet_has_a_setup() -> None:
    found = snippets()
    assert set(found) <= set(SETUPS), f"README snippets without a setup here: {set(found) - set(SETUPS)}"
    assert set(SETUPS) <= set(found), f"setups whose README snippet is gone: {set(SETUPS) - set(found)}"


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_readme_snippet_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setup, check = SETUPS[name]
    monkeypatch.chdir(tmp_path)  # relative paths in a snippet land here
    namespace, paths = setup(tmp_path)
    for code in snippets()[name]:
        for old, new in paths.items():
            code = code.replace(old, new)
        exec(compile(code, f"README.md:{name}", "exec"), namespace)  # the README's own code
    check(namespace, tmp_path)


def test_quickstart_example_runs() -> None:
    """The README's main example command: it runs and prints each step."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = done.stdout
    assert "v1: 100000 rows in 3 fragments" in out
    assert "rows at positions 0, 5 and 7 (after the delete)" in out
    assert "compacted into 1 fragment(s)" in out
    assert "pylance" in out.splitlines()[-1]
