"""Progress of long operations: callbacks get monotonic events whose totals match what the
operation did; ``progress=True`` draws a tqdm bar on stderr, the default draws one only on a
terminal; pylance's ``FragmentWriteProgress`` hooks see the same files as with pylance."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import select
import struct
import sys
import termios
from pathlib import Path
from typing import IO

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import InputTypeError
from lance_table.fragment import LanceFragment, write_fragments
from lance_table.progress import (
    FileSystemFragmentWriteProgress,
    FragmentWriteProgress,
    ProgressEvent,
    ProgressWarning,
)
from lance_table.table import progress as progress_module

lance = pytest.importorskip("lance")


def _table(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "x": [float(i) for i in range(n)]})


def _check(events: list[ProgressEvent], operation: str, phases: list[str]) -> dict[str, ProgressEvent]:
    """The events are of ``operation``, its ``phases`` in order, each starting from zero with
    counts that never decrease and never pass a known total; the last is ``complete``. Returns
    each phase's last event."""
    assert events and {e.operation for e in events} == {operation}
    assert [e.phase for e in events if e.event == "start"] == phases
    assert events[-1].event == "complete" and [e.event for e in events].count("complete") == 1
    last: dict[str, ProgressEvent] = {}
    for e in events:
        before = last.get(e.phase)
        if e.event == "start":
            assert (e.rows, e.files, e.bytes) == (0, 0, 0)
        else:
            assert before is not None
            assert (e.rows, e.files, e.bytes) >= (before.rows, before.files, before.bytes)
            assert e.rows >= before.rows and e.files >= before.files and e.bytes >= before.bytes
            assert (e.rows_total, e.files_total, e.bytes_total) == (
                before.rows_total,
                before.files_total,
                before.bytes_total,
            )
        for done, total in ((e.rows, e.rows_total), (e.files, e.files_total), (e.bytes, e.bytes_total)):
            assert total is None or done <= total
        last[e.phase] = e
    return last


def _file_bytes(ds: lt.LanceDataset, fragment_ids: set[int] | None = None) -> int:
    return sum(
        f.file_size_bytes or 0
        for frag in ds.get_fragments()
        if fragment_ids is None or frag.fragment_id in fragment_ids
        for f in frag.data_files()
    )


@pytest.mark.parametrize("version", ["2.1", "legacy"])
def test_write_dataset_events(tmp_path: Path, version: str) -> None:
    events: list[ProgressEvent] = []
    ds = lt.write_dataset(
        _table(0, 100),
        tmp_path / "d",
        max_rows_per_file=30,
        data_storage_version=version,
        progress=events.append,
    )
    done = _check(events, "write", ["write"])["write"]
    assert (done.rows, done.rows_total, done.files, done.files_total) == (100, 100, 4, None)
    assert done.bytes == _file_bytes(ds) > 0
    assert done.fraction == 1.0 and done.rows_per_second is not None and done.rows_per_second > 0
    # an input whose length is not known up front: no total, the same counts
    events.clear()
    reader = pa.RecordBatchReader.from_batches(_table(0, 1).schema, _table(0, 50).to_batches(max_chunksize=7))
    lt.write_dataset(reader, tmp_path / "d", mode="append", progress=events.append)
    done = _check(events, "write", ["write"])["write"]
    assert (done.rows, done.rows_total, done.files) == (50, None, 1)


class _Hooks(FragmentWriteProgress):
    """Counts what the hooks see (pylance's upstream tests use such a class)."""

    def __init__(self) -> None:
        self.begun: list[tuple[int, int]] = []
        self.completed: list[tuple[int, int]] = []

    def begin(self, fragment, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self.begun.append((fragment.id, len(fragment.files)))

    def complete(self, fragment) -> None:  # type: ignore[no-untyped-def]  (no kwargs, as upstream's)
        self.completed.append((fragment.id, fragment.physical_rows))


class _PylanceHooks(lance.progress.FragmentWriteProgress):
    def __init__(self) -> None:
        self.completed: list[tuple[int, int]] = []

    def begin(self, fragment, **kwargs) -> None:  # type: ignore[no-untyped-def]
        pass

    def complete(self, fragment, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self.completed.append((fragment.id, fragment.physical_rows))


def test_fragment_write_progress_as_pylance(tmp_path: Path) -> None:
    data = pa.table({"a": range(10)})
    ours, theirs = _Hooks(), _PylanceHooks()
    ds = lt.write_dataset(data, tmp_path / "ours", max_rows_per_file=5, progress=ours)
    lance.write_dataset(data, tmp_path / "theirs", max_rows_per_file=5, progress=theirs)
    assert len(ds.get_fragments()) == 2 and len(ours.begun) == 2
    assert ours.completed == theirs.completed == [(0, 5), (0, 5)]
    # write_fragments and LanceFragment.create take them too (the id of create's fragment shows)
    hooks = _Hooks()
    frags = write_fragments(
        pa.table({"a": range(10, 17)}), tmp_path / "ours", max_rows_per_file=3, progress=hooks
    )
    assert len(frags) == 3 and hooks.completed == [(0, 3), (0, 3), (0, 1)]
    hooks = _Hooks()
    LanceFragment.create(tmp_path / "ours", pa.table({"a": [1, 2]}), fragment_id=7, progress=hooks)
    assert hooks.begun == [(7, 1)] and hooks.completed == [(7, 2)]
    # a pylance hooks object works with lance_table too
    theirs = _PylanceHooks()
    lt.write_dataset(data, tmp_path / "ours", mode="append", max_rows_per_file=4, progress=theirs)
    assert theirs.completed == [(0, 4), (0, 4), (0, 2)]


def _failing(schema_batch: pa.RecordBatch) -> pa.RecordBatchReader:
    def batches():  # type: ignore[no-untyped-def]
        yield schema_batch
        raise RuntimeError("the source broke")

    return pa.RecordBatchReader.from_batches(schema_batch.schema, batches())


@pytest.mark.parametrize("library", ["lance_table", "pylance"])
def test_file_system_fragment_write_progress(tmp_path: Path, library: str) -> None:
    """What pylance's upstream test of this class checks, with either library's class."""
    mod = lt if library == "lance_table" else lance
    tracker = (
        FileSystemFragmentWriteProgress
        if library == "lance_table"
        else lance.progress.FileSystemFragmentWriteProgress
    )
    progress_dir, uri = tmp_path / "progress", tmp_path / "dataset"
    frag = mod.LanceFragment.create(
        str(uri), pa.table({"a": range(100)}), progress=tracker(str(progress_dir))
    )
    assert not (progress_dir / "fragment_0.in_progress").exists()
    meta = json.loads((progress_dir / "fragment_0.json").read_text())
    assert meta["id"] == 0 and len(meta["files"]) == 1
    assert frag.files[0].path == mod.fragment.FragmentMetadata.from_json(json.dumps(meta)).files[0].path
    # a write that fails leaves its in-progress record, with the tracker's metadata
    with pytest.raises(Exception, match="the source broke"):
        mod.LanceFragment.create(
            str(uri),
            _failing(pa.record_batch([pa.array(range(100))], names=["a"])),
            fragment_id=1,
            progress=tracker(str(progress_dir), metadata={"test_key": "test_value"}),
        )
    state = json.loads((progress_dir / "fragment_1.in_progress").read_text())
    assert state == {"fragment_id": 1, "metadata": {"test_key": "test_value"}}
    assert json.loads((progress_dir / "fragment_1.json").read_text())["id"] == 1


def _dataset(tmp_path: Path) -> lt.LanceDataset:
    ds = lt.write_dataset(_table(0, 60), tmp_path / "d", max_rows_per_file=10)
    for start in (60, 70, 80):
        ds = lt.write_dataset(_table(start, 10), tmp_path / "d", mode="append")
    ds.delete("id < 5")
    return ds


def test_compact_cleanup_events(tmp_path: Path) -> None:
    ds = _dataset(tmp_path)
    events: list[ProgressEvent] = []
    before = {f.fragment_id for f in ds.get_fragments()}
    metrics = ds.optimize.compact_files(target_rows_per_fragment=40, progress=events.append)
    done = _check(events, "compact", ["rewrite"])["rewrite"]
    new = {f.fragment_id for f in ds.get_fragments()} - before
    assert done.rows == done.rows_total == ds.count_rows() == 85
    assert done.files == metrics.files_added == len(new) and done.bytes == _file_bytes(ds, new)

    events.clear()
    stats = ds.cleanup_old_versions(
        older_than=dt.timedelta(0), delete_unverified=True, progress=events.append
    )
    last = _check(events, "cleanup", ["versions", "files"])
    versions, files = last["versions"], last["files"]
    assert versions.files == versions.files_total == stats.old_versions > 0
    assert files.files == files.files_total == stats.files_removed > 0
    assert versions.bytes + files.bytes == stats.bytes_removed
    assert (versions.bytes, files.bytes) == (versions.bytes_total, files.bytes_total)
    # a dry run reports nothing
    events.clear()
    ds.cleanup_old_versions(older_than=dt.timedelta(0), dry_run=True, progress=events.append)
    assert events == []


def test_merge_update_add_columns_events(tmp_path: Path) -> None:
    ds = _dataset(tmp_path)
    physical = sum(f.physical_rows for f in ds.get_fragments())
    events: list[ProgressEvent] = []
    source = pa.table({"id": pa.array([7, 8, 200, 201, 202], pa.int64()), "x": [0.5] * 5})
    stats = (
        ds.merge_insert("id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute(source, progress=events.append)
    )
    last = _check(events, "merge_insert", ["match", "write"])
    assert last["match"].rows == last["match"].rows_total == physical
    assert (
        last["write"].rows
        == last["write"].rows_total
        == stats["num_updated_rows"] + stats["num_inserted_rows"]
    )
    assert last["write"].files == 1

    events.clear()
    physical = sum(f.physical_rows for f in ds.get_fragments())
    result = ds.update({"x": "x + 1"}, "id >= 50", progress=events.append)
    last = _check(events, "update", ["scan", "write"])
    assert last["scan"].rows == last["scan"].rows_total == physical
    assert last["write"].rows == last["write"].rows_total == result["num_rows_updated"] == 43

    events.clear()
    frags = ds.get_fragments()
    ds.add_columns({"y": "id * 2"}, progress=events.append)
    done = _check(events, "add_columns", ["write"])["write"]
    assert done.rows == done.rows_total == sum(f.physical_rows for f in frags)
    assert done.files == done.files_total == len(frags)
    assert ds.to_table(columns=["y"]).column("y").to_pylist() == [
        2 * i for i in ds.to_table().column("id").to_pylist()
    ]


def test_bar_forced_and_silent_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm")
    lt.write_dataset(_table(0, 50), tmp_path / "d", max_rows_per_file=20, progress=True)
    err = capsys.readouterr().err
    assert "write: 100%" in err and "50/50" in err and "3 files" in err
    ds = lt.dataset(tmp_path / "d")
    ds.cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True, progress=True)
    assert "cleanup files" in capsys.readouterr().err
    # stderr is no terminal under pytest: nothing is shown unless asked for
    ds = _dataset(tmp_path / "quiet")
    ds.optimize.compact_files(target_rows_per_fragment=40)
    ds.update({"x": "x + 1"})
    ds.add_columns({"y": "id"}, progress=False)
    assert capsys.readouterr() == ("", "")
    assert progress_module.reporter("write", None) is progress_module.SILENT


def test_bar_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default draws the bar when stderr is a terminal (a pseudo-terminal here)."""
    pytest.importorskip("tqdm")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # rows, columns

    def shown(terminal: IO[str]) -> bytes:
        terminal.flush()
        out = b""
        while select.select([master], [], [], 0.1)[0]:
            out += os.read(master, 65536)
        return out

    with os.fdopen(slave, "w") as terminal:
        monkeypatch.setattr(sys, "stderr", terminal)
        lt.write_dataset(_table(0, 30), tmp_path / "d")
        drawn = shown(terminal)
        assert b"write: 100%" in drawn and b"30/30" in drawn
        lt.write_dataset(_table(0, 30), tmp_path / "d", mode="append", progress=False)
        assert shown(terminal) == b""
    os.close(master)


def test_without_tqdm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if not installed: importing it fails
    monkeypatch.setattr(progress_module, "_warned", False)
    with pytest.warns(ProgressWarning, match="tqdm"):
        lt.write_dataset(_table(0, 10), tmp_path / "d", progress=True)
    lt.write_dataset(_table(0, 10), tmp_path / "d", mode="append", progress=True)  # warned once only
    assert capsys.readouterr().err == ""
    events: list[ProgressEvent] = []
    lt.write_dataset(_table(0, 10), tmp_path / "d", mode="append", progress=events.append)
    assert events[-1].rows == 10  # callbacks need no tqdm


def test_bad_progress_argument(tmp_path: Path) -> None:
    with pytest.raises(InputTypeError, match="progress") as raised:
        lt.write_dataset(_table(0, 10), tmp_path / "d", progress="yes")  # type: ignore[arg-type]
    assert isinstance(raised.value, TypeError)
    assert not (tmp_path / "d").exists() or not list((tmp_path / "d").rglob("*.lance"))
    ds = lt.write_dataset(_table(0, 10), tmp_path / "d")
    with pytest.raises(TypeError, match="progress"):
        ds.optimize.compact_files(progress=3)  # type: ignore[arg-type]


def test_callback_error_fails_the_write(tmp_path: Path) -> None:
    def stop(event: ProgressEvent) -> None:
        if event.files:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lt.write_dataset(_table(0, 50), tmp_path / "d", max_rows_per_file=10, progress=stop)
    assert not list((tmp_path / "d").rglob("*.lance"))  # the files written are removed


def test_an_update_tells_its_search_of_many_fragments_as_it_goes(tmp_path: Path) -> None:
    ds = lt.write_dataset(_table(0, 1000), tmp_path / "many", max_rows_per_file=5)  # 200 fragments
    events: list[ProgressEvent] = []
    result = ds.update({"x": "x * 2"}, "id % 100 = 7", progress=events.append)
    last = _check(events, "update", ["scan", "write"])
    assert last["scan"].rows == last["scan"].rows_total == 1000
    steps = [e.rows for e in events if e.phase == "scan" and e.event == "progress"]
    assert len(steps) > 1 and steps[0] < 1000  # told group by group, not once at the end
    assert result["num_rows_updated"] == 10
    got = lt.dataset(tmp_path / "many").to_table(filter="id % 100 = 7").sort_by("id")
    assert got.column("x").to_pylist() == [2.0 * i for i in range(7, 1000, 100)]
