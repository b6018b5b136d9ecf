"""Forced interleavings of cleanup with commits, restores and tag writers: nothing committed is lost.

Each test stops one operation at a chosen storage call (:class:`Pause`), runs another to the end,
then lets the first finish, and checks that the latest version and every tagged version are fully
readable, on local disk and on the moto S3 server.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CommitConflictError, TagError, VersionNotFoundError
from lance_table.format import paths
from lance_table.table import tags as tags_module
from lance_table.table.commit import protocol
from lance_table.table.operations import cleanup as cleanup_module
from lance_table.table.tags import IN_FLIGHT_SECONDS

NOW = dt.timedelta(0)


# the calls that list _versions
LISTINGS = ("list_names", "list_names_page")


#: the calls that remove files (cleanup removes many at once where the store allows it)
DELETES = ("delete", "delete_many")


class Pause:
    """Stop the ``nth`` call of ``storage.<method>`` whose first argument matches, until released.

    ``method`` may name several methods, whose calls are counted together (a listing of
    ``_versions`` is ``list_names`` or, for the newest versions on S3, ``list_names_page``); a
    call given a list of paths (``delete_many``) matches when one of them does.
    With ``after=True`` the call runs first and the pause comes before it returns.
    """

    def __init__(
        self,
        storage: Any,
        method: str | tuple[str, ...],
        match: Callable[[str], bool],
        *,
        nth: int = 1,
        after: bool = False,
    ) -> None:
        self.reached = threading.Event()
        self.go = threading.Event()
        seen = [0]

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                hit = False
                first = args[0]
                if any(map(match, first)) if isinstance(first, list) else match(first):
                    seen[0] += 1
                    hit = seen[0] == nth
                if hit and not after:
                    self._stop()
                result = original(*args, **kwargs)
                if hit and after:
                    self._stop()
                return result

            return wrapper

        for name in (method,) if isinstance(method, str) else method:
            setattr(storage, name, wrap(getattr(storage, name)))

    def _stop(self) -> None:
        self.reached.set()
        assert self.go.wait(60), "never released"


class Run:
    """Run ``fn`` in a thread; ``result()`` returns its value or raises its exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(fn,), daemon=True)
        self._thread.start()

    def _main(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:
            self._error = exc

    def done(self, timeout: float = 0.0) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self) -> Any:
        assert self.done(60), "still running"
        if self._error is not None:
            raise self._error
        return self._value


def pause_at(pause: Pause, fn: Callable[[], Any]) -> Run:
    """Start ``fn`` and wait until it stops at ``pause``."""
    run = Run(fn)
    if not pause.reached.wait(60):
        run.result()  # it finished or failed without reaching the pause: show why
        raise AssertionError("the operation never reached the pause")
    return run


def is_manifest(path: str) -> bool:
    return path.startswith(paths.VERSIONS_DIR + "/") and path.endswith(paths.MANIFEST_SUFFIX)


def is_versions_dir(path: str) -> bool:
    return path == paths.VERSIONS_DIR


def rows(lo: int, hi: int) -> pa.Table:
    ids = np.arange(lo, hi)
    return pa.table({"id": ids, "s": pa.array([f"r{i}" for i in ids.tolist()])})


@pytest.fixture(autouse=True, params=["held", "read_again"])
def manifest_bytes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Cleanup holds the bytes of every doomed manifest it read (a short history), or none of
    them ("read_again": as past its memory bound, each manifest read again in the batch that
    deletes it, one a batch: every batch looks again for tags and pins)."""
    if request.param == "read_again":
        monkeypatch.setattr(cleanup_module, "HELD_BYTES", 0)
        monkeypatch.setattr(cleanup_module, "DELETE_BATCH", 1)
    return str(request.param)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def place(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[str, dict[str, str] | None]:
    if request.param == "local":
        return str(tmp_path / "ds"), None
    return request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options")


class History:
    """v1: ids 0..99 in two fragments; v2: appends 100..199; v3: deletes ids < 50 (all of fragment 0)."""

    def __init__(self, place: tuple[str, dict[str, str] | None]) -> None:
        self.uri, self.options = place
        lt.write_dataset(rows(0, 100), self.uri, storage_options=self.options, max_rows_per_file=50)
        lt.write_dataset(rows(100, 200), self.uri, mode="append", storage_options=self.options)
        self.open().delete("id < 50")  # drops fragment 0: only v1 and v2 need its file
        self.contents = {1: rows(0, 100), 2: rows(0, 200), 3: rows(50, 200)}

    def open(self, version: int | str | None = None) -> lt.Dataset:
        """A handle with a storage object of its own (so that pauses stay with one operation)."""
        return lt.dataset(self.uri, version=version, storage_options=self.options)

    def cleanup(self, ds: lt.Dataset | None = None, **kwargs: Any) -> Any:
        return (ds or self.open()).cleanup_old_versions(older_than=NOW, **kwargs)

    def assert_readable(self, ds: lt.Dataset, expected: pa.Table) -> None:
        got = ds.to_table().sort_by("id")
        assert got.equals(expected), f"version {ds.version} differs"

    def assert_all_live_readable(self, expect_latest: pa.Table) -> None:
        """The latest version and every tagged version read in full (and pylance agrees)."""
        latest = self.open()
        self.assert_readable(latest, expect_latest)
        for name, tag in latest.tags.list().items():
            self.assert_readable(self.open(name), self.contents[tag.version])
        if self.options is None:
            lance = pytest.importorskip("lance")
            assert lance.dataset(self.uri).to_table().sort_by("id").equals(expect_latest)


# -- a commit never lands below the latest version ------------------------------------------------


def _cleaned_below_latest(history: History) -> lt.Dataset:
    """A handle at v1, after v4 was committed and v1..v3 were cleaned up."""
    old = history.open(1)
    lt.write_dataset(rows(200, 210), history.uri, mode="append", storage_options=history.options)
    history.contents[4] = pa.concat_tables([rows(50, 200), rows(200, 210)])
    stats = history.cleanup()
    assert stats.old_versions == 3
    assert [v["version"] for v in history.open().versions()] == [4]
    return old


def test_a_commit_based_on_a_cleaned_up_version_is_refused_and_retryable(place):
    """Compaction planned on a version whose successors are gone: refused before writing anything;
    the conflict is retryable (re-run on the latest version, it needs none of them)."""
    history = History(place)
    old = _cleaned_below_latest(history)
    with pytest.raises(CommitConflictError, match="cleaned up") as info:
        old.optimize.compact_files(target_rows_per_fragment=1000)
    assert info.value.retryable is True
    assert [v["version"] for v in history.open().versions()] == [4]
    history.assert_all_live_readable(history.contents[4])


def test_a_delete_from_a_handle_whose_successors_are_cleaned_up_reruns_on_the_latest(place):
    history = History(place)
    old = _cleaned_below_latest(history)
    assert old.delete("id = 60") == {"num_deleted_rows": 1}
    assert old.version == 5  # the handle moved to the version it committed, above the latest
    assert [v["version"] for v in history.open().versions()] == [4, 5]
    latest = history.contents[4]
    history.assert_all_live_readable(latest.filter(pa.compute.not_equal(latest["id"], 60)))


def test_a_delete_reading_a_cleaned_up_file_reruns_on_the_latest(place):
    """The delete reads a file of its handle's version that cleanup removed along with the versions
    since: not a missing file but the retryable conflict, and the delete runs again on the latest."""
    history = History(place)
    old = _cleaned_below_latest(history)
    assert old.delete("id = 10") == {"num_deleted_rows": 0}  # id 10 was in the fragment v3 dropped
    assert [v["version"] for v in history.open().versions()] == [4, 5]
    history.assert_all_live_readable(history.contents[4])


def test_a_commit_finding_versions_cleaned_up_after_planning_reruns_on_the_latest(place):
    """The versions go while the delete writes its files: the delete never lands in the hole, it
    is planned again on the latest version."""
    history = History(place)
    old = history.open(1)
    lt.write_dataset(rows(200, 210), history.uri, mode="append", storage_options=history.options)
    pause = Pause(old._storage, "write_new", lambda p: p.startswith(paths.TRANSACTIONS_DIR))
    run = pause_at(pause, lambda: old.delete("id = 60"))
    history.cleanup()
    pause.go.set()
    assert run.result() == {"num_deleted_rows": 1}
    assert [v["version"] for v in history.open().versions()] == [4, 5]
    latest = pa.concat_tables([rows(50, 200), rows(200, 210)])
    history.assert_all_live_readable(latest.filter(pa.compute.not_equal(latest["id"], 60)))


def test_restore_of_a_cleaned_up_version_is_refused(place):
    history = History(place)
    old = _cleaned_below_latest(history)
    with pytest.raises(VersionNotFoundError):
        old.restore()
    assert [v["version"] for v in history.open().versions()] == [4]
    history.assert_all_live_readable(history.contents[4])


def test_a_commit_from_an_old_handle_rebases_over_every_version(place):
    history = History(place)
    old = history.open(1)
    old.delete("id = 50")
    assert old.version == 4  # the handle moved to the version it committed
    expected = rows(50, 200).filter(pa.compute.not_equal(rows(50, 200)["id"], 50))
    history.assert_all_live_readable(expected)


def test_the_spark_writer_planned_on_a_cleaned_up_version_is_refused(place):
    pytest.importorskip("pyspark")
    from lance_table.spark.write import LanceTableWriter

    history = History(place)
    writer = LanceTableWriter(history.uri, history.options, rows(0, 1).schema, False)
    assert writer.read_version == 3
    lt.write_dataset(rows(200, 210), history.uri, mode="append", storage_options=history.options)
    lt.write_dataset(rows(210, 220), history.uri, mode="append", storage_options=history.options)
    history.cleanup()
    with pytest.raises(CommitConflictError, match="cleaned up") as info:
        writer.commit([])
    assert info.value.retryable is True
    assert [v["version"] for v in history.open().versions()] == [5]


def _append(history: History, lo: int, hi: int) -> None:
    lt.write_dataset(rows(lo, hi), history.uri, mode="append", storage_options=history.options)


def _assert_landed_on_the_latest(history: History, committed: lt.Dataset, expected: pa.Table) -> None:
    """The commit's version is the latest, the history has no hole above it and its rows are there."""
    latest = history.open()
    assert latest.version == committed.version
    listed = [v["version"] for v in latest.versions()]
    assert listed == list(range(listed[0], listed[-1] + 1)), f"a hole in {listed}"
    history.assert_all_live_readable(expected)


def test_a_commit_in_flight_never_lands_in_a_hole_cleanup_made(place):
    """The delete listed v3 and will create v4; meanwhile v4 and v5 are committed and a cleanup
    runs: v4 must still be there when the delete creates it, so that it rebases onto v5."""
    history = History(place)
    deleter = history.open()
    pause = Pause(deleter._storage, "put_if_absent", is_manifest)
    run = pause_at(pause, lambda: deleter.delete("id >= 190"))
    _append(history, 200, 210)
    _append(history, 210, 220)
    history.cleanup()
    pause.go.set()
    run.result()
    committed = deleter  # the handle moved to the version it committed
    assert committed.version == 6
    _assert_landed_on_the_latest(history, committed, pa.concat_tables([rows(50, 190), rows(200, 220)]))


def test_a_retried_commit_never_lands_in_a_hole_cleanup_made(place):
    """The delete lost v4 to an append; while it backs off, v5 and v6 are committed and a cleanup
    runs; its retry must not find v4 gone and create v5 there."""
    history = History(place)
    deleter = history.open()
    first = Pause(deleter._storage, "put_if_absent", is_manifest)
    probe = Pause(deleter._storage, "read", lambda p: p == paths.manifest_path(4))
    run = pause_at(first, lambda: deleter.delete("id >= 190"))
    _append(history, 200, 210)  # v4: the delete's first try fails
    first.go.set()
    assert probe.reached.wait(60), "the retry never looked for v4"
    _append(history, 210, 220)
    _append(history, 220, 230)
    history.cleanup()
    probe.go.set()
    run.result()
    committed = deleter  # the handle moved to the version it committed
    assert committed.version == 7
    _assert_landed_on_the_latest(history, committed, pa.concat_tables([rows(50, 190), rows(200, 230)]))


def test_cleanup_keeps_versions_a_commit_in_flight_may_need_then_removes_them(place):
    """A transaction file no manifest references keeps the versions above its read version; once
    it is referenced (the commit landed), the next cleanup removes them."""
    history = History(place)
    deleter = history.open()
    pause = Pause(deleter._storage, "put_if_absent", is_manifest)
    run = pause_at(pause, lambda: deleter.delete("id >= 190"))
    _append(history, 200, 210)
    _append(history, 210, 220)
    stats = history.cleanup()
    assert stats.old_versions == 3  # v1..v3: the delete read v3 and needs v4 and v5 only
    assert [v["version"] for v in history.open().versions()] == [4, 5]
    pause.go.set()
    run.result()
    assert deleter.version == 6
    assert history.cleanup().old_versions == 2
    assert [v["version"] for v in history.open().versions()] == [6]
    history.assert_all_live_readable(pa.concat_tables([rows(50, 190), rows(200, 220)]))


def test_cleanup_ignores_transaction_files_of_writers_that_died_long_ago(tmp_path):
    history = History((str(tmp_path / "ds"), None))
    name = paths.transaction_file_name(1, "00000000-0000-0000-0000-000000000000")
    txn = tmp_path / "ds" / paths.transaction_path(name)
    txn.write_bytes(b"")  # a writer killed before it created its manifest
    assert history.cleanup().old_versions == 1  # v2 is above its read version: it may be needed
    assert [v["version"] for v in history.open().versions()] == [2, 3]
    long_ago = time.time() - IN_FLIGHT_SECONDS - 60
    os.utime(txn, (long_ago, long_ago))
    assert history.cleanup().old_versions == 1
    assert [v["version"] for v in history.open().versions()] == [3]
    history.assert_all_live_readable(rows(50, 200))


def test_opening_a_version_cleaned_up_while_it_is_read_is_a_version_not_found_error(place):
    history = History(place)
    reader = history.open()
    pause = Pause(reader._storage, "read", lambda p: p == paths.manifest_path(2))
    run = pause_at(pause, lambda: reader.checkout(2))
    history.cleanup()
    pause.go.set()
    with pytest.raises(VersionNotFoundError, match="no longer exists"):
        run.result()


def test_opening_the_latest_version_cleaned_up_while_it_is_read_opens_the_new_latest(place):
    history = History(place)
    reader = history.open()
    pause = Pause(reader._storage, "read", lambda p: p == paths.manifest_path(3))
    run = pause_at(pause, reader.checkout_latest)
    _append(history, 200, 210)
    history.cleanup()
    pause.go.set()
    run.result()
    assert reader.version == 4


def test_restoring_a_version_cleaned_up_while_it_is_read_is_a_version_not_found_error(place):
    history = History(place)
    cleaner = history.open()
    hold_cleanup = Pause(cleaner._storage, DELETES, is_manifest)
    cleanup = pause_at(hold_cleanup, lambda: history.cleanup(cleaner))  # v1 and v2 are doomed
    restorer = history.open(1)
    hold_restore = Pause(restorer._storage, "read", lambda p: p == paths.manifest_path(1))
    restore = pause_at(hold_restore, restorer.restore)
    # cleanup's next look at the pins (after deleting the manifests, before bringing pinned ones back)
    looks_again = Pause(cleaner._storage, "list_dir", lambda p: p == paths.PINS_DIR)
    hold_cleanup.go.set()
    assert looks_again.reached.wait(60)
    hold_restore.go.set()
    with pytest.raises(VersionNotFoundError):
        restore.result()
    looks_again.go.set()
    cleanup.result()
    history.assert_all_live_readable(rows(50, 200))


# -- cleanup against restore -------------------------------------------------------------------


def test_restore_committed_while_cleanup_decides(place):
    """Cleanup has read every manifest; the restore commits before it deletes anything."""
    history = History(place)
    cleaner = history.open()
    pause = Pause(cleaner._storage, DELETES, is_manifest)
    run = pause_at(pause, lambda: history.cleanup(cleaner))
    restored = history.open(1)
    restored.restore()
    assert restored.version == 4
    pause.go.set()
    run.result()
    history.assert_all_live_readable(rows(0, 100))


def test_restore_reading_while_cleanup_runs_whole(place):
    """The restore has read the old version (and pinned it); cleanup runs from start to end."""
    history = History(place)
    restorer = history.open(1)
    pause = Pause(restorer._storage, "put_if_absent", is_manifest)
    run = pause_at(pause, restorer.restore)
    history.cleanup()
    pause.go.set()
    run.result()
    assert restorer.version == 4
    history.assert_all_live_readable(rows(0, 100))


def test_restore_after_cleanup_deleted_the_manifest(place):
    """Cleanup deleted the old manifest and has not looked again: the restore fails cleanly."""
    history = History(place)
    restorer = history.open(1)
    cleaner = history.open()
    pause = Pause(cleaner._storage, LISTINGS, is_versions_dir, nth=2)
    run = pause_at(pause, lambda: history.cleanup(cleaner))
    with pytest.raises(VersionNotFoundError):
        restorer.restore()
    pause.go.set()
    run.result()
    assert [v["version"] for v in history.open().versions()] == [3]
    history.assert_all_live_readable(rows(50, 200))


def test_restore_committed_just_before_cleanup_looks_again(place):
    """Cleanup deleted the manifests; a restore that read v1 before that commits now."""
    history = History(place)
    restorer = history.open(1)
    hold_restore = Pause(restorer._storage, "put_if_absent", is_manifest)
    restore = pause_at(hold_restore, restorer.restore)
    cleaner = history.open()
    hold_cleanup = Pause(cleaner._storage, LISTINGS, is_versions_dir, nth=2)
    cleanup = pause_at(hold_cleanup, lambda: history.cleanup(cleaner))
    hold_restore.go.set()
    restore.result()
    assert restorer.version == 4
    hold_cleanup.go.set()
    cleanup.result()
    history.assert_all_live_readable(rows(0, 100))


# -- cleanup against commits -------------------------------------------------------------------


def test_append_committed_while_cleanup_decides(place):
    history = History(place)
    cleaner = history.open()
    pause = Pause(cleaner._storage, DELETES, is_manifest)
    run = pause_at(pause, lambda: history.cleanup(cleaner))
    lt.write_dataset(rows(200, 210), history.uri, mode="append", storage_options=history.options)
    pause.go.set()
    run.result()
    history.assert_all_live_readable(pa.concat_tables([rows(50, 200), rows(200, 210)]))


def test_delete_committing_while_cleanup_runs_whole(place):
    history = History(place)
    deleter = history.open()
    pause = Pause(deleter._storage, "put_if_absent", is_manifest)
    run = pause_at(pause, lambda: deleter.delete("id >= 190"))
    history.cleanup()
    pause.go.set()
    run.result()
    assert deleter.version == 4
    history.assert_all_live_readable(rows(50, 190))


# -- cleanup against tag writers ---------------------------------------------------------------


def test_tag_created_while_cleanup_decides_keeps_its_version(place):
    """Cleanup read no tag; a tag on v1 appears before it deletes: v1 comes back whole."""
    history = History(place)
    cleaner = history.open()
    pause = Pause(cleaner._storage, DELETES, is_manifest)
    run = pause_at(pause, lambda: history.cleanup(cleaner))
    history.open().tags.create("keep", 1)
    pause.go.set()
    run.result()
    assert history.open().tags.get_version("keep") == 1
    history.assert_all_live_readable(rows(50, 200))


def test_tag_created_after_cleanup_deleted_the_version_is_refused(place):
    history = History(place)
    cleaner = history.open()
    pause = Pause(cleaner._storage, LISTINGS, is_versions_dir, nth=2)
    run = pause_at(pause, lambda: history.cleanup(cleaner))
    with pytest.raises(VersionNotFoundError):
        history.open().tags.create("keep", 1)
    pause.go.set()
    run.result()
    assert history.open().tags.list() == {}
    history.assert_all_live_readable(rows(50, 200))


def test_tag_written_after_a_whole_cleanup_is_undone(place):
    """The tag writer found v1, then cleanup ran whole, then the tag was written: it is taken back."""
    history = History(place)
    tagger = history.open()
    pause = Pause(tagger._storage, "put_if_absent", lambda p: p == paths.tag_path("keep"))
    run = pause_at(pause, lambda: tagger.tags.create("keep", 1))
    history.cleanup()
    pause.go.set()
    with pytest.raises(VersionNotFoundError, match="cleaned up"):
        run.result()
    assert history.open().tags.list() == {}
    history.assert_all_live_readable(rows(50, 200))


def test_tag_checked_after_cleanup_brought_its_version_back(place):
    """Cleanup has decided; the tag is written, cleanup deletes v1, looks again and brings it back,
    and only then does the tag writer check its version."""
    history = History(place)
    cleaner = history.open()
    hold_cleanup = Pause(cleaner._storage, DELETES, is_manifest)
    cleanup = pause_at(hold_cleanup, lambda: history.cleanup(cleaner))
    tagger = history.open()
    hold_tag = Pause(tagger._storage, "put_if_absent", lambda p: p == paths.tag_path("keep"), after=True)
    tag = pause_at(hold_tag, lambda: tagger.tags.create("keep", 1))
    hold_cleanup.go.set()
    cleanup.result()
    hold_tag.go.set()
    tag.result()
    assert history.open().tags.get_version("keep") == 1
    history.assert_all_live_readable(rows(50, 200))


def test_tag_update_written_after_a_whole_cleanup_is_undone(place):
    history = History(place)
    history.open().tags.create("t", 3)
    tagger = history.open()
    pause = Pause(tagger._storage, "write", lambda p: p == paths.tag_path("t"))
    run = pause_at(pause, lambda: tagger.tags.update("t", 1))
    history.cleanup()
    pause.go.set()
    with pytest.raises(VersionNotFoundError):
        run.result()
    assert history.open().tags.get_version("t") == 3
    history.assert_all_live_readable(rows(50, 200))


def test_tag_update_while_cleanup_decides_keeps_its_version(place):
    history = History(place)
    history.open().tags.create("t", 3)
    cleaner = history.open()
    pause = Pause(cleaner._storage, DELETES, is_manifest)
    run = pause_at(pause, lambda: history.cleanup(cleaner, error_if_tagged_old_versions=False))
    history.open().tags.update("t", 2)
    pause.go.set()
    run.result()
    assert history.open().tags.get_version("t") == 2
    history.assert_all_live_readable(rows(50, 200))


# -- tag writers against each other ------------------------------------------------------------


def test_tag_update_cannot_bring_back_a_tag_deleted_meanwhile(place):
    history = History(place)
    history.open().tags.create("t", 1)
    updater = history.open()
    pause = Pause(updater._storage, "read", lambda p: p == paths.tag_path("t"))
    update = pause_at(pause, lambda: updater.tags.update("t", 2))
    delete = Run(lambda: history.open().tags.delete("t"))
    assert not delete.done(0.3)  # waits for the updater's lock
    pause.go.set()
    update.result()
    delete.result()
    assert history.open().tags.list() == {}


def _update_and_delete_at_once(history: History, name: str) -> dict[str, BaseException | None]:
    """Update and delete one tag from two threads released together; what each raised."""
    barrier = threading.Barrier(2)
    outcome: dict[str, BaseException | None] = {}

    def act(kind: str) -> None:
        barrier.wait()
        try:
            if kind == "update":
                history.open().tags.update(name, 2)
            else:
                history.open().tags.delete(name)
            outcome[kind] = None
        except TagError as exc:
            outcome[kind] = exc

    threads = [threading.Thread(target=act, args=(k,)) for k in ("update", "delete")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome


def test_threaded_tag_updates_and_deletes_never_resurrect(tmp_path):
    history = History((str(tmp_path / "ds"), None))
    tags = history.open().tags
    for trial in range(60):
        name = f"t{trial}"
        tags.create(name, 1)
        outcome = _update_and_delete_at_once(history, name)
        assert outcome["delete"] is None
        assert name not in tags.list(), f"trial {trial}: a deleted tag came back"


# -- leftovers ---------------------------------------------------------------------------------


def test_cleanup_removes_temporary_files_of_killed_writers(tmp_path):
    import os
    import time

    history = History((str(tmp_path / "ds"), None))
    root = tmp_path / "ds"
    old = time.time() - 8 * 86400
    leftovers = [root / "_versions" / ".tmp-dead", root / "_refs" / "tags" / "x.json.tmp-dead"]
    young = root / "_versions" / ".tmp-alive"
    stale_pin = root / "_refs" / "pins" / "dead.json"
    stale_pin.parent.mkdir(parents=True)
    for path in [*leftovers, young, stale_pin]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"partial")
    for path in [*leftovers, stale_pin]:
        os.utime(path, (old, old))
    history.cleanup()
    assert not any(p.exists() for p in [*leftovers, stale_pin])
    assert young.exists()  # may belong to a writer still at work
    history.assert_all_live_readable(rows(50, 200))


def test_a_slow_commit_rewrites_its_transaction_file_and_looks_again(place, monkeypatch):
    """A commit that has run for COMMIT_REFRESH_SECONDS shows cleanup it is alive before it creates
    its manifest, and learns the latest version anew."""
    assert tags_module.COMMIT_REFRESH_SECONDS * 4 <= IN_FLIGHT_SECONDS
    monkeypatch.setattr(protocol, "COMMIT_REFRESH_SECONDS", 0.0)
    history = History(place)
    deleter = history.open()
    writes: list[str] = []
    storage = deleter._storage
    original, original_new = storage.write, storage.write_new

    def write(path: str, data: bytes) -> None:
        writes.append(path)
        original(path, data)

    def write_new(path: str, data: bytes) -> None:
        writes.append(path)
        storage.write = original  # (a backend's write_new may be its write: count it once)
        try:
            original_new(path, data)
        finally:
            storage.write = write

    storage.write, storage.write_new = write, write_new
    deleter.delete("id >= 190")
    txns = [p for p in writes if p.startswith(paths.TRANSACTIONS_DIR + "/")]
    assert len(txns) == 2 and len(set(txns)) == 1
    assert deleter.version == 4
    history.assert_all_live_readable(rows(50, 190))


def test_references_of_doomed_versions_from_their_transactions_equal_the_full_union(tmp_path):
    """Cleanup decodes only the first manifest of each run of doomed versions and adds what each
    later transaction added: the result must be the union of what every doomed manifest references."""
    from lance_table.storage import open_storage
    from lance_table.table import versions as versions_module
    from lance_table.table.operations import cleanup_references as refs_module

    uri = str(tmp_path / "ds")
    lt.write_dataset(rows(0, 100), uri, max_rows_per_file=30)
    for lo in range(100, 400, 50):
        lt.write_dataset(rows(lo, lo + 50), uri, mode="append")
    lt.dataset(uri).delete("id % 7 = 0")
    lt.dataset(uri).delete("id >= 380")
    lt.dataset(uri).compact_files(target_rows_per_fragment=200)
    lt.dataset(uri, version=3).restore()
    lt.write_dataset(rows(1000, 1010), uri, mode="append")
    lt.write_dataset(rows(2000, 2010), uri, mode="overwrite")
    lt.write_dataset(rows(3000, 3010), uri, mode="append")
    storage = open_storage(uri)
    entries = versions_module.list_versions(storage)
    found = {v.entry.version: v for v in refs_module._read_all(storage, entries)}
    ops = {v["version"]: v["operation"] for v in lt.dataset(uri).versions()}
    assert {"append", "delete", "reserve_fragments", "rewrite", "restore", "overwrite"} <= set(ops.values())
    for doomed_versions in (set(found), set(found) - {5, 12}, {2, 3, 4}, {1}):
        doomed = {v: found[v] for v in doomed_versions}
        full = set().union(*(refs_module.referenced_files(f.manifest(storage)) for f in doomed.values()))
        assert refs_module._references_of_doomed(storage, doomed) == full, sorted(doomed_versions)


def test_restore_that_lands_and_unpins_while_cleanup_looks_again(place):
    """The restore read v1 (pinned) after cleanup decided v1 goes; cleanup deletes v1's manifest
    and lists the versions; the restore lands as v4 and unpins; only then does cleanup look at the
    pins. v4 references v1's files: they must stay."""
    history = History(place)
    cleaner = history.open()
    decided = Pause(cleaner._storage, DELETES, is_manifest)
    cleanup = pause_at(decided, lambda: history.cleanup(cleaner))
    restorer = history.open(1)
    hold_restore = Pause(restorer._storage, "put_if_absent", is_manifest)
    restore = pause_at(hold_restore, restorer.restore)
    listed = Pause(cleaner._storage, LISTINGS, is_versions_dir, after=True)
    decided.go.set()
    assert listed.reached.wait(60)
    hold_restore.go.set()
    restore.result()
    assert restorer.version == 4
    listed.go.set()
    cleanup.result()
    history.assert_all_live_readable(rows(0, 100))
