"""Fault injection: fail the k-th storage write of a commit, for every k, before and after the write.

Afterwards the dataset must open at the old or the new version with the right contents, every
manifest must be whole, and only orphan files may be left, which cleanup removes.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pytest
from conftest import make_rows
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.format.manifest_file import decode_manifest_file
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.commit import CommitOptions
from lance_table.table.dataset import Dataset
from lance_table.table.operations.cleanup_references import referenced_files
from lance_table.table.snapshot import Snapshot


class InjectedFault(OSError):
    pass


class FaultyStorage:
    """A storage whose k-th mutating call fails ("before": nothing happens; "after": it happens)."""

    MUTATING = ("write", "put_if_absent", "delete", "open_writer")

    def __init__(self, inner: Storage, fail_at: int | None, mode: str) -> None:
        self._inner = inner
        self.fail_at = fail_at
        self.mode = mode
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self.MUTATING:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(f"{name}({args[0]})")
            failing = len(self.calls) == self.fail_at
            if failing and self.mode == "before":
                raise InjectedFault(f"injected failure before {name}")
            result = attr(*args, **kwargs)
            if name == "open_writer":
                result = _FaultyStream(result, self, failing)
            elif failing:
                raise InjectedFault(f"injected failure after {name}")
            return result

        return call


class _FaultyStream:
    def __init__(self, inner: IO[bytes], owner: FaultyStorage, failing: bool) -> None:
        self._inner = inner
        self._failing = failing and owner.mode == "after"
        self._written = 0

    def write(self, data: Any) -> int:
        n = self._inner.write(data)
        self._written += 1
        if self._failing and self._written == 2:
            raise InjectedFault("injected failure in the middle of a data file")
        return n

    def flush(self) -> None:
        self._inner.flush()

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _FaultyStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


BASE = make_rows(0, 300)


def _append(ds: Dataset) -> pa.Table:
    from lance_table.format.transaction import Append
    from lance_table.table.commit import Pending, commit
    from lance_table.table.operations.inputs import coerce_reader as as_reader
    from lance_table.table.operations.write import write_fragments

    more = make_rows(1000, 120)
    frags, _, _ = write_fragments(
        ds._storage, as_reader(more), ds.schema, list(ds.manifest.fields), max_rows_per_file=50
    )
    commit(ds._storage, ds.manifest, Pending(Append(tuple(frags)), ds.version))
    return pa.concat_tables([BASE, more])


def _delete(ds: Dataset) -> pa.Table:
    ds.delete("id % 7 = 0 OR id >= 200")
    return BASE.filter(
        pa.compute.invert(
            pa.compute.or_(
                pa.compute.equal(pa.compute.modulo(BASE["id"], 7), 0),
                pa.compute.greater_equal(BASE["id"], 200),
            )
        )
    )


def _compact(ds: Dataset) -> pa.Table:
    ds.delete("id < 30")  # through the faulty storage too; the handle moves to its version
    ds.compact_files(target_rows_per_fragment=1000)
    return BASE.slice(30)


OPERATIONS: dict[str, Callable[[Dataset], pa.Table]] = {
    "append": _append,
    "delete": _delete,
    "compact": _compact,
}


def _fresh(tmp_path: Path, name: str) -> str:
    uri = tmp_path / name
    if uri.exists():
        shutil.rmtree(uri)
    lt.write_dataset(BASE, uri, max_rows_per_file=100)
    return str(uri)


def _run(
    uri: str, op: Callable[[Dataset], pa.Table], fail_at: int | None, mode: str
) -> tuple[pa.Table | None, list[str]]:
    faulty = FaultyStorage(open_storage(uri), fail_at, mode)
    ds = Dataset(Snapshot(faulty, lt.dataset(uri).manifest, None, CommitOptions()))  # type: ignore[arg-type]
    try:
        return op(ds), faulty.calls
    except (InjectedFault, lt.LanceTableError):
        return None, faulty.calls


def _verify(uri: str, old: pa.Table, new: pa.Table) -> None:
    storage = open_storage(uri)
    entries = versions.list_versions(storage)
    for entry in entries:  # every manifest is whole
        decode_manifest_file(storage.read(entry.path), entry.path)
    latest = lt.dataset(uri)
    got = latest.to_table()
    assert got.equals(old) or got.equals(new) or _same(got, new), (
        f"version {latest.version} has unexpected rows"
    )
    # orphans only: cleanup with no grace removes every unreferenced file, and the data stays readable
    latest.cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    refs = set()
    for entry in versions.list_versions(storage):
        refs |= referenced_files(versions.read_manifest_file(storage, entry).manifest)
    for directory in ("data", "_deletions", "_transactions"):
        for item in storage.list_tree(directory):
            assert item.path in refs, f"{item.path} survived cleanup without being referenced"
    assert_tables_equal(lt.dataset(uri).to_table(), got, check_metadata=False)


def _same(a: pa.Table, b: pa.Table) -> bool:
    try:
        assert_tables_equal(a, b, check_metadata=False)
        return True
    except AssertionError:
        return False


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_failure_point_leaves_a_consistent_dataset(tmp_path, name):
    op = OPERATIONS[name]
    uri = _fresh(tmp_path, "probe")
    new, calls = _run(uri, op, None, "before")
    assert isinstance(new, pa.Table)
    assert any(c.startswith("put_if_absent") for c in calls)
    for mode in ("before", "after"):
        for k in range(1, len(calls) + 1):
            uri = _fresh(tmp_path, f"{mode}-{k}")
            _run(uri, op, k, mode)
            try:
                _verify(uri, BASE, new)
            except AssertionError as exc:
                raise AssertionError(f"{name}: failure {mode} call {k} ({calls[k - 1]}): {exc}") from exc


class _FailingClose:
    """A stream whose close fails after closing (the file is complete on disk, but not for us)."""

    def __init__(self, inner: IO[bytes]) -> None:
        self._inner = inner

    def write(self, data: Any) -> int:
        return self._inner.write(data)

    def flush(self) -> None:
        self._inner.flush()

    def close(self) -> None:
        self._inner.close()
        raise InjectedFault("injected failure closing a data file")


@pytest.mark.parametrize("failing_file", [0, 1, 3])
def test_a_file_failing_to_close_in_the_background_fails_the_write_and_leaves_no_file(tmp_path, failing_file):
    """Finished files close on a thread while the next one is written; when one fails to close,
    the write raises that error and every file it wrote is gone."""
    from lance_table.table.operations.inputs import coerce_reader as as_reader
    from lance_table.table.operations.write import write_fragments

    uri = _fresh(tmp_path, "ds")
    inner = open_storage(uri)
    opened: list[str] = []

    class OneFailingClose:
        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        def open_writer(self, path: str) -> Any:
            stream = inner.open_writer(path)
            opened.append(path)
            return _FailingClose(stream) if len(opened) - 1 == failing_file else stream

    before = {item.path for item in inner.list_tree("data")}
    ds = lt.dataset(uri)
    with pytest.raises(InjectedFault, match="closing a data file"):
        write_fragments(
            OneFailingClose(),
            as_reader(make_rows(1000, 200)),
            ds.schema,
            list(ds.manifest.fields),
            max_rows_per_file=50,
        )  # type: ignore[arg-type]
    assert len(opened) > failing_file
    assert {item.path for item in inner.list_tree("data")} == before
