"""Config and metadata changes through a stale handle, against pylance 14 on copies of one dataset:
another writer commits, cleanup may remove the versions in between, then the stale handle commits.

Where pylance commits, lance_table commits the same result; where pylance reports a conflict
(the same key, map or field changed by both), lance_table raises ``CommitConflictError``. Two
deliberate differences: a change preempted by a concurrent schema change (pylance: a retryable
error) is re-run on the latest version here; and when cleanup removed the history, pylance
overwrites a key the other writer changed (it cannot see the transaction) where lance_table sees
the change in the manifests and reports the conflict it would have reported with the history.
"""

from __future__ import annotations

import datetime as dt
import shutil

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CommitConflictError

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

GONE = dt.timedelta(0)


def _copies(tmp_path) -> list[str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(pa.table({"a": [1, 2, 3], "b": [4, 5, 6]}), ours)
    lance.dataset(ours).update_config({"x": "0"})
    lance.dataset(ours).update_metadata({"k": "0"})
    shutil.copytree(ours, theirs)
    return [ours, theirs]


def _race(lib, uri: str, other, stale, cleanup: bool):
    """``other`` commits through a fresh handle (twice, so that cleanup has versions to remove),
    then ``stale`` through a handle opened before; the stale handle's outcome and the state."""
    handle = lib.dataset(uri)
    writer = lib.dataset(uri)
    other(writer)
    writer.update_config({"filler": "1"})
    if cleanup:
        lib.dataset(uri).cleanup_old_versions(older_than=GONE, delete_unverified=True)
        assert len(lib.dataset(uri).versions()) == 1  # the stale handle's history is gone
    try:
        stale(handle)
        outcome = ("ok", handle.version)
    except CommitConflictError:
        outcome = ("conflict", None)
    except OSError as exc:  # pylance's conflicts
        outcome = ("conflict" if "Incompatible transaction" in str(exc) else f"error: {exc}", None)
    latest = lib.dataset(uri)
    return outcome, latest.version, latest.config(), latest.metadata, latest.schema.metadata


CASES = {
    "other config keys": (lambda d: d.update_config({"y": "1"}), lambda d: d.update_config({"z": "2"})),
    "delete a key both delete": (
        lambda d: d.delete_config_keys(["x"]),
        lambda d: d.delete_config_keys(["x"]),
    ),
    "other table metadata keys": (
        lambda d: d.update_metadata({"j": "1"}),
        lambda d: d.update_metadata({"m": "2"}),
    ),
    "schema metadata after a delete": (
        lambda d: d.delete("a = 1"),
        lambda d: d.update_schema_metadata({"s": "2"}),
    ),
    "field metadata of another field": (
        lambda d: d.update_field_metadata({"a": {"f": "1"}}),
        lambda d: d.update_field_metadata({"b": {"g": "2"}}),
    ),
}
CONFLICTS = {
    "same config key": (lambda d: d.update_config({"x": "1"}), lambda d: d.update_config({"x": "2"})),
    "config key set, then deleted": (
        lambda d: d.update_config({"x": "1"}),
        lambda d: d.delete_config_keys(["x"]),
    ),
    "same table metadata key": (
        lambda d: d.update_metadata({"k": "1"}),
        lambda d: d.update_metadata({"k": None}),
    ),
    "schema metadata twice": (
        lambda d: d.update_schema_metadata({"s": "1"}),
        lambda d: d.update_schema_metadata({"t": "2"}),
    ),
    "same field": (
        lambda d: d.update_field_metadata({"a": {"f": "1"}}),
        lambda d: d.update_field_metadata({"a": {"g": "2"}}),
    ),
}


@pytest.mark.parametrize("cleanup", [False, True], ids=["history", "history-gone"])
def test_stale_config_changes_match_pylance(tmp_path, cleanup):
    for i, (name, (other, stale)) in enumerate(CASES.items()):
        ours, theirs = _copies(tmp_path / str(i))
        got = _race(lt, ours, other, stale, cleanup)
        want = _race(lance, theirs, other, stale, cleanup)
        assert got == want, name
        assert got[0][0] == "ok", name


def test_same_key_changes_conflict_with_or_without_history(tmp_path):
    for i, (name, (other, stale)) in enumerate(CONFLICTS.items()):
        ours, theirs = _copies(tmp_path / str(i))
        got = _race(lt, ours, other, stale, cleanup=False)
        want = _race(lance, theirs, other, stale, cleanup=False)
        assert got == want, name
        assert got[0][0] == "conflict", name
        # the history cleaned up: the change another writer made is still seen (pylance overwrites it)
        ours = _copies(tmp_path / f"gone{i}")[0]
        before = lt.dataset(ours)
        other(lt.dataset(ours))
        lt.dataset(ours).update_config({"filler": "1"})
        lt.dataset(ours).cleanup_old_versions(older_than=GONE, delete_unverified=True)
        assert len(lt.dataset(ours).versions()) == 1
        with pytest.raises(CommitConflictError, match="concurrent change of") as info:
            stale(before)
        assert not info.value.retryable, name
        assert before.version == 3, name  # the handle stays where it was


def test_preempted_by_a_schema_change_is_rerun_on_the_latest_version(tmp_path):
    ours, theirs = _copies(tmp_path)
    handle = lt.dataset(ours)
    lt.dataset(ours).add_columns({"c": "a + 1"})
    handle.update_field_metadata({"a": {"f": "1"}})
    # pylance reports a retryable conflict; its retry is what lance_table does
    pl = lance.dataset(theirs)
    lance.dataset(theirs).add_columns({"c": "a + 1"})
    with pytest.raises(OSError, match="Retryable commit conflict"):
        pl.update_field_metadata({"a": {"f": "1"}})
    lance.dataset(theirs).update_field_metadata({"a": {"f": "1"}})
    for uri in (ours, theirs):
        for lib in (lt, lance):
            ds = lib.dataset(uri)
            assert ds.version == 5
            assert ds.schema.field("a").metadata == {b"f": b"1"}
            assert ds.to_table().column("c").to_pylist() == [2, 3, 4]
