"""Read counts: ``iops_counter()`` / ``bytes_read_counter()`` (pylance's process-wide counters) and
the ``LanceRead`` line of ``explain_plan`` / ``analyze_plan``, against pylance 14 on copies of one
dataset. Row, range and fragment counts must be pylance's; reads and bytes are each library's own
(pylance reads small files in more, overlapping requests), checked against the files read."""

from __future__ import annotations

import os
import re
import shutil
import threading

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table._parallel import map_fragments
from lance_table.storage.io_stats import IOStats, collecting

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


@pytest.fixture
def copies(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    table = pa.table({"a": pa.array(range(400), pa.int64()), "b": [f"s{i}" for i in range(400)]})
    lance.write_dataset(table, ours, max_rows_per_file=100)
    shutil.copytree(ours, theirs)
    return ours, theirs


def _data_bytes(uri: str) -> int:
    data = os.path.join(uri, "data")
    return sum(os.path.getsize(os.path.join(data, f)) for f in os.listdir(data))


def _lance_read(plan: str) -> dict[str, str]:
    """The fields (and metrics) of the plan's LanceRead line."""
    # (pylance's plan of a late-materialized projection reads the rest in a second LanceRead)
    (line,) = [x.strip() for x in plan.splitlines() if x.strip().startswith("LanceRead:") and "num_fr" in x]
    fields = dict(re.findall(r"(\w+)=(\[[^\]]*\]|[^,\]]*)", line.split("metrics=")[0]))
    metrics = re.search(r"metrics=\[(.*)\]", line)
    if metrics:
        fields.update(re.findall(r"(\w+)=([^,]*)", metrics.group(1)))
    return fields


SAME = ("projection", "num_fragments", "row_id", "row_addr")
ROWS = ("output_rows", "fragments_scanned", "ranges_scanned", "rows_scanned")
# (reads: each library reads small files its own way; lance_table reads one this small whole)
SCANS = [
    ({}, ROWS),
    ({"columns": [], "filter": "a < 50", "with_row_id": True}, ROWS),
    ({"columns": ["b"], "with_row_address": True}, ROWS),
    # pylance reads only the rows of the fragments that the offset and limit keep, lance_table
    # those fragments whole
    ({"columns": ["b"], "limit": 150, "offset": 20}, ROWS[:2]),
]


def test_plans_read_as_pylance_s(copies):
    ours, theirs = copies
    for kwargs, counts in SCANS:
        mine = lt.dataset(ours).scanner(**kwargs)
        pl = lance.dataset(theirs).scanner(**kwargs)
        got, want = _lance_read(mine.explain_plan(True)), _lance_read(pl.explain_plan(True))
        assert {k: got[k] for k in SAME} == {k: want[k] for k in SAME}, kwargs
        got, want = _lance_read(mine.analyze_plan()), _lance_read(pl.analyze_plan())
        assert {k: got[k] for k in SAME + counts} == {k: want[k] for k in SAME + counts}, kwargs
        # bytes: each library's own reads (pylance reads more than these small files hold)
        assert 0 < int(got["bytes_read"]) <= _data_bytes(ours), kwargs


def test_counters_count_the_bytes_of_the_files_read(copies):
    ours, _ = copies
    file_bytes = _data_bytes(ours)
    ds = lt.dataset(ours)
    iops, read = lt.iops_counter(), lt.bytes_read_counter()
    assert ds.to_table().num_rows == 400
    whole = lt.bytes_read_counter() - read
    assert lt.iops_counter() - iops >= 4  # at least one read of each data file
    assert 400 * 8 < whole <= file_bytes
    read = lt.bytes_read_counter()
    ds.to_table(columns=["a"])
    assert 400 * 8 <= lt.bytes_read_counter() - read < whole
    # analyze_plan's counts are the process's counts of the same reads (nothing else reads here)
    iops, read = lt.iops_counter(), lt.bytes_read_counter()
    got = _lance_read(ds.scanner(columns=["a"]).analyze_plan())
    spent = (lt.iops_counter() - iops, lt.bytes_read_counter() - read)
    assert (int(got["iops"]), int(got["bytes_read"])) == spent


def test_reads_count_for_the_context_that_made_them(copies):
    ours, _ = copies
    path = lt.dataset(ours).get_fragments()[0].data_files()[0].path
    storage = lt.dataset(ours)._snapshot.storage

    def read(_: object = None) -> None:
        storage.read(f"data/{path}")

    size = storage.size(f"data/{path}")
    with collecting(IOStats()) as stats:
        map_fragments(read, range(3))  # tasks on lance_table's pool count for the caller
        other = threading.Thread(target=read)  # a thread of its own does not
        other.start()
        other.join()
    assert stats == IOStats(requests=3, iops=3, bytes_read=3 * size)
