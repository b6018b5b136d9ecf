"""The dataset interop matrix: lance_table and pylance take turns writing one dataset, in every data
file format, and after every step both open every version and must agree with the expected rows.

Each case is a format (2.0, 2.1, 2.2) and a writer pattern ("P" pylance, "L" lance_table; the first
letter creates the dataset). The script: create, append, delete, append in uneven batches, compact,
delete again, overwrite (format not given: it must be kept), tag, restore the tag, append, delete.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

import lance_table as lt

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

FORMATS = ("2.0", "2.1", "2.2")
# Repeated over the steps. PL and LP are complements, so each side does every step (create, compact,
# overwrite, tag, restore) in one of them; the paired patterns run with the stress suite.
PATTERNS = [
    "PL",
    "LP",
    pytest.param("LLPP", marks=pytest.mark.stress),
    pytest.param("PPLL", marks=pytest.mark.stress),
]
ROWS_PER_FILE = 1200  # a few thousand rows per step make several fragments

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("a", pa.float64(), metadata={"unit": "metre", "note": "nullable"}),
        pa.field("s", pa.string()),
        pa.field("l", pa.list_(pa.int32())),
        pa.field("st", pa.struct([pa.field("k", pa.int32()), pa.field("w", pa.float64(), nullable=False)])),
        pa.field("f", pa.list_(pa.float32(), 4)),
    ],
    metadata={"origin": "interop-matrix"},
)


def _mod_eq(col: pa.ChunkedArray, m: int, r: int) -> pa.Array:
    return pa.array(col.to_numpy() % m == r)


# (filter, the same predicate over an expected table)
COUNT_FILTERS: list[tuple[str, Callable[[pa.Table], pa.ChunkedArray]]] = [
    ("a IS NULL", lambda t: pc.is_null(t["a"])),
    ("a > 0.5 AND s IS NOT NULL", lambda t: pc.and_kleene(pc.greater(t["a"], 0.5), pc.is_valid(t["s"]))),
    (
        "id % 3 = 1 OR st.k IS NULL",
        lambda t: pc.or_kleene(_mod_eq(t["id"], 3, 1), pc.is_null(pc.struct_field(t["st"], "k"))),
    ),
]


def _rows(start: int, n: int) -> pa.Table:
    """Deterministic rows with ids ``start .. start + n``: nulls, empty lists and a nullable child."""
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + n, dtype=np.int64)
    a = pa.array(rng.random(n), mask=rng.random(n) < 0.1)
    words = np.array(["", "x", "lance", "table", "ünïcode", "a longer string value"], dtype=object)
    s = pa.array([None if i % 9 == 4 else f"{words[i % len(words)]}-{i}" for i in ids.tolist()], pa.string())
    lens = rng.integers(1, 6, n)
    values = rng.integers(-1000, 1000, int(lens.sum())).astype(np.int32).tolist()
    lists: list[list[int] | None] = []
    pos = 0
    for i, m in zip(ids.tolist(), lens.tolist(), strict=True):
        if i % 11 == 3:
            lists.append(None)
        elif i % 7 == 2:
            lists.append([])
        else:
            lists.append(values[pos : pos + m])
        pos += m
    k = pa.array(rng.integers(0, 100, n).astype(np.int32), mask=ids % 5 == 0)
    st = pa.StructArray.from_arrays([k, pa.array(rng.random(n))], fields=list(SCHEMA.field("st").type))
    f = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4)
    return pa.Table.from_arrays(
        [pa.array(ids), a, s, pa.array(lists, pa.list_(pa.int32())), st, f], schema=SCHEMA
    )


def _uneven_reader(table: pa.Table) -> pa.RecordBatchReader:
    """``table`` as batches of very different sizes (one row, a prime, big ones)."""
    sizes = [1, 17, 640, 2, 1500]
    batches, pos = [], 0
    while pos < table.num_rows:
        for size in sizes:
            if pos >= table.num_rows:
                break
            batches.extend(table.slice(pos, size).to_batches())
            pos += size
    return pa.RecordBatchReader.from_batches(table.schema, batches)


DELETES: dict[str, Callable[[pa.Table], pa.ChunkedArray]] = {
    "id % 7 = 3 OR a > 0.95": lambda t: pc.or_kleene(_mod_eq(t["id"], 7, 3), pc.greater(t["a"], 0.95)),
    "(id >= 3000 AND id < 4200) OR (s IS NULL AND id < 1500)": lambda t: pc.or_kleene(
        pc.and_(pc.greater_equal(t["id"], 3000), pc.less(t["id"], 4200)),
        pc.and_(pc.is_null(t["s"]), pc.less(t["id"], 1500)),
    ),
    "id < 200 OR st.k IS NULL": lambda t: pc.or_kleene(
        pc.less(t["id"], 200), pc.is_null(pc.struct_field(t["st"], "k"))
    ),
}


@dataclasses.dataclass
class History:
    uri: str
    fmt: str
    expected: dict[int, pa.Table] = dataclasses.field(default_factory=dict)
    marks: dict[str, int] = dataclasses.field(default_factory=dict)
    fresh: list[int] = dataclasses.field(default_factory=list)  # the versions the last step made

    @property
    def current(self) -> pa.Table:
        return self.expected[max(self.expected)]

    def record(self, table: pa.Table) -> None:
        """Every version committed since the last record holds ``table`` (compaction commits two)."""
        latest = lance.dataset(self.uri).version
        assert latest == lt.dataset(self.uri).version
        start = max(self.expected) + 1 if self.expected else 1
        assert latest >= start, "the step committed nothing"
        self.fresh = list(range(start, latest + 1))
        for v in self.fresh:
            self.expected[v] = table.sort_by("id")


def _write(writer: str, h: History, data: object, mode: str, **kw: object) -> None:
    if writer == "P":
        lance.write_dataset(data, h.uri, mode=mode, max_rows_per_file=ROWS_PER_FILE, **kw)
    else:
        lt.write_dataset(data, h.uri, mode=mode, max_rows_per_file=ROWS_PER_FILE, **kw)


def _delete(writer: str, h: History, predicate: str) -> None:
    if writer == "P":
        lance.dataset(h.uri).delete(predicate)
    else:
        lt.dataset(h.uri).delete(predicate)
    t = h.current
    h.record(t.filter(pc.invert(pc.fill_null(DELETES[predicate](t), False))))


def step_create(writer: str, h: History) -> None:
    table = _rows(0, 3000)
    _write(writer, h, table, "create", data_storage_version=h.fmt)
    h.record(table)


def step_append(writer: str, h: History) -> None:
    more = _rows(3000, 2500)
    _write(writer, h, more, "append")
    h.record(pa.concat_tables([h.current, more]))


def step_delete(writer: str, h: History) -> None:
    _delete(writer, h, "id % 7 = 3 OR a > 0.95")
    h.marks["after-first-delete"] = max(h.expected)


def step_append_uneven(writer: str, h: History) -> None:
    more = _rows(5500, 3400)
    more = more.set_column(2, "s", pa.nulls(more.num_rows, pa.string()))  # a column of only nulls
    _write(writer, h, _uneven_reader(more), "append")
    h.record(pa.concat_tables([h.current, more]))


def step_compact(writer: str, h: History) -> None:
    before = len(lance.dataset(h.uri).get_fragments())
    if writer == "P":
        lance.dataset(h.uri).optimize.compact_files(target_rows_per_fragment=5000)
    else:
        lt.dataset(h.uri).compact_files(target_rows_per_fragment=5000)
    h.record(h.current)
    after = lance.dataset(h.uri).get_fragments()
    assert len(after) < before
    assert all(f.metadata.deletion_file is None for f in after)  # deletions materialized


def step_delete_again(writer: str, h: History) -> None:
    _delete(writer, h, "(id >= 3000 AND id < 4200) OR (s IS NULL AND id < 1500)")


def step_overwrite(writer: str, h: History) -> None:
    table = _rows(100_000, 4000)
    _write(writer, h, table, "overwrite")  # no data_storage_version: the dataset's is kept
    h.record(table)


def step_tag(writer: str, h: History) -> None:
    version = h.marks["after-first-delete"]
    if writer == "P":
        lance.dataset(h.uri).tags.create("before-overwrite", version)
    else:
        lt.dataset(h.uri).tags.create("before-overwrite", version)
    assert lance.dataset(h.uri).tags.list()["before-overwrite"]["version"] == version
    assert lt.dataset(h.uri).tags.get_version("before-overwrite") == version
    for opened in (
        lance.dataset(h.uri, version="before-overwrite"),
        lt.dataset(h.uri, version="before-overwrite"),
    ):
        assert opened.version == version


def step_restore(writer: str, h: History) -> None:
    if writer == "P":
        lance.dataset(h.uri, version="before-overwrite").restore()
    else:
        lt.dataset(h.uri, version="before-overwrite").restore()
    h.record(h.expected[h.marks["after-first-delete"]])


def step_append_after_restore(writer: str, h: History) -> None:
    more = _rows(200_000, 1500)
    _write(writer, h, more, "append")
    h.record(pa.concat_tables([h.current, more]))


def step_delete_after_restore(writer: str, h: History) -> None:
    _delete(writer, h, "id < 200 OR st.k IS NULL")


STEPS = [
    step_create,
    step_append,
    step_delete,
    step_append_uneven,
    step_compact,
    step_delete_again,
    step_overwrite,
    step_tag,
    step_restore,
    step_append_after_restore,
    step_delete_after_restore,
]


def _check(h: History) -> None:
    """Both sides, at the latest version and every earlier one, agree with the expected rows.

    Filtered counts and takes run on the versions the step made (a version never changes; its
    full contents are compared again after every later step).
    """
    ours_latest, theirs_latest = lt.dataset(h.uri), lance.dataset(h.uri)
    assert ours_latest.version == theirs_latest.version == max(h.expected)
    assert [v["version"] for v in ours_latest.versions()] == [v["version"] for v in theirs_latest.versions()]
    assert [v["version"] for v in ours_latest.versions()] == sorted(h.expected)
    for version, expected in h.expected.items():
        ours, theirs = lt.dataset(h.uri, version=version), lance.dataset(h.uri, version=version)
        assert ours.data_storage_version == theirs.data_storage_version == h.fmt, version
        for frag in ours.manifest.fragments:
            assert {f.version for f in frag.files} == {h.fmt}
        assert ours.schema.equals(theirs.schema, check_metadata=True), (ours.schema, theirs.schema)
        assert ours.schema.equals(SCHEMA, check_metadata=True), ours.schema
        ours_rows, theirs_rows = ours.to_table(), theirs.to_table()
        # the same rows in the same (fragment) order on both sides
        assert_tables_equal(ours_rows, theirs_rows, check_metadata=False)
        assert_tables_equal(ours_rows.sort_by("id"), expected, check_metadata=False)
        assert ours.count_rows() == theirs.count_rows() == expected.num_rows
        if version not in h.fresh:
            continue
        for text, predicate in COUNT_FILTERS:
            want = pc.sum(pc.fill_null(predicate(expected), False).cast(pa.int64())).as_py() or 0
            assert ours.count_rows(filter=text) == theirs.count_rows(filter=text) == want, (version, text)
        n = expected.num_rows
        if n:
            idx = [0, n - 1, n // 2, 7 % n, 7 % n, n // 3]
            got = ours.take(idx)
            assert_tables_equal(got, theirs.take(idx), check_metadata=False)
            assert_tables_equal(got, theirs_rows.take(pa.array(idx)), check_metadata=False)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_interop_matrix(tmp_path, fmt, pattern):
    h = History(str(tmp_path / "ds"), fmt)
    for i, step in enumerate(STEPS):
        writer = pattern[i % len(pattern)]
        h.fresh = []
        step(writer, h)
        _check(h)
