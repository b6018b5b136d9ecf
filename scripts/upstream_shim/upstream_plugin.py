"""pytest plugin of ``scripts/upstream_tests.py``: per-test outcomes as JSON lines, and a timeout.

Environment:
    UPSTREAM_RESULTS: the JSON-lines file to append to (one ``start`` and one ``result`` line per
        test, a ``collect`` line per module that failed to import, ``finished`` at the end).
    UPSTREAM_TIMEOUT: seconds a test may run (setup, call and teardown) before it fails with
        ``TestTimeout``; a test stuck where Python cannot interrupt it ends the process after three
        times as long (the harness then records it as a crash and runs the tests left).
    UPSTREAM_DESELECT: a file of node ids (one a line) not to run: those done before a crash.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_OUT = Path(os.environ["UPSTREAM_RESULTS"])
_TIMEOUT = float(os.environ.get("UPSTREAM_TIMEOUT", "0"))


class TestTimeout(Exception):
    """The test ran longer than the harness's per-test timeout."""


def _write(record: dict[str, Any]) -> None:
    with _OUT.open("a") as out:
        out.write(json.dumps(record) + "\n")
        out.flush()


def _on_alarm(signum: int, frame: Any) -> None:
    raise TestTimeout(f"test ran longer than {_TIMEOUT:g}s")


def pytest_configure(config: pytest.Config) -> None:
    if _TIMEOUT > 0:
        signal.signal(signal.SIGALRM, _on_alarm)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get("UPSTREAM_DESELECT")
    if not path:
        return
    done = set(Path(path).read_text().splitlines())
    keep = [item for item in items if item.nodeid not in done]
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
    items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    import _lt_shim

    _lt_shim.COLLECTING = False
    for name in dict.fromkeys(_lt_shim.IMPORT_TIME_USES):
        _write({"kind": "import_use", "name": name})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        text = str(report.longrepr)
        lines = [line for line in text.splitlines() if line.startswith("E ")]
        _write({"kind": "collect", "nodeid": report.nodeid, "error": (lines or [text])[-1][:500]})


def _origin(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """Where the exception came from: the deepest frame in lance_table, else the last test frame."""
    entries = [e for e in excinfo.traceback if not str(e.path).endswith("_lt_shim.py")]
    if not entries:
        return ""
    ours = [e for e in entries if "/lance_table/" in str(e.path)]
    entry = (ours or entries)[-1]
    path = str(entry.path)
    for marker in ("/lance_table/", "/site-packages/", "/tests/"):
        if marker in path:
            path = marker.strip("/") + "/" + path.split(marker, 1)[1]
            break
    return f"{path}:{entry.lineno + 1} in {entry.name}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome: Any = yield
    report = outcome.get_result()
    phases: list[dict[str, Any]] = item.stash.setdefault(_PHASES, [])
    record: dict[str, Any] = {"when": report.when, "outcome": report.outcome}
    if hasattr(report, "wasxfail"):
        record["xfail"] = True
    if report.failed and call.excinfo is not None:
        value = call.excinfo.value
        message = str(value).strip()
        record["type"] = type(value).__name__
        record["message"] = message[:2000]
        record["origin"] = _origin(call.excinfo)
    phases.append(record)


_PHASES = pytest.StashKey[list[dict[str, Any]]]()


def _summarize(phases: list[dict[str, Any]]) -> dict[str, Any]:
    for phase in phases:
        if phase["outcome"] == "failed":
            kind = "failed" if phase["when"] == "call" else "error"
            return {"outcome": kind, **{k: phase.get(k) for k in ("type", "message", "origin")}}
    for phase in phases:
        if phase.get("xfail"):
            return {"outcome": "xfailed" if phase["outcome"] == "skipped" else "xpassed"}
        if phase["outcome"] == "skipped":
            return {"outcome": "skipped"}
    return {"outcome": "passed" if phases else "unknown"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    _write({"kind": "start", "nodeid": item.nodeid})
    started = time.monotonic()
    if _TIMEOUT > 0:
        signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
        faulthandler.dump_traceback_later(3 * _TIMEOUT, exit=True)
    try:
        yield
    finally:
        if _TIMEOUT > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.cancel_dump_traceback_later()
    _forget_memory_datasets()
    summary = _summarize(item.stash.get(_PHASES, []))
    seconds = round(time.monotonic() - started, 2)
    _write({"kind": "result", "nodeid": item.nodeid, "seconds": seconds, **summary})


def _forget_memory_datasets() -> None:
    """Free the ``memory://`` datasets a test left behind.

    pylance gives each ``lance.dataset``/``write_dataset`` call with a ``memory://`` URI a store of
    its own, so no test sees another's ``memory://test``; lance_table's ``memory://`` store is one per
    process (a second handle sees the first's writes). Freeing it after each test gives the tests the
    isolation they rely on without changing what either library does within a test.
    """
    try:
        from lance_table.storage import clear_memory
    except ImportError:
        return
    clear_memory()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _write({"kind": "finished", "exitstatus": int(exitstatus)})
