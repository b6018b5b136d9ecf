"""Many small files whose column metadata repeats (the appends of a living table: the same
fields, row counts and sizes in every file): a batch makes a field's layout once per distinct
metadata and reuses it for the other files, and reads the same rows as pylance, on files either
library wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import small_layouts
from lance_table.table.session import clear_caches

FIELDS = ["id", "ts", "load", "source", "category", "flag", "payload", "tags"]


def _events(start: int, n: int, load: int) -> pa.Table:
    """Records of one append: the same shapes and sizes in each, a per-append constant (``load``)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    payload = pa.StructArray.from_arrays(
        [pa.array(ids % 1000), pa.array([f"user-{i % 7}" for i in range(n)])], ["user_id", "user"]
    )
    tags = [["a", "b", "c"][: i % 4] if i % 5 else None for i in range(n)]
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(ids * 1000, pa.timestamp("ms")),
            "load": pa.array([load] * n, pa.int64()),
            "source": pa.array(["web", "app"] * (n // 2)),
            # dictionaries: the same bytes in files of the same load % 3, else of their own
            "category": pa.array(
                [None if i % 10 == 3 else f"category-{(i * 7 + load % 3) % 5}" for i in range(n)]
            ),
            "flag": pa.array([None if i % 4 == 0 else i % 3 == 0 for i in range(n)], pa.bool_()),
            "payload": payload,
            "tags": pa.array(tags, pa.list_(pa.string())),
        }
    )


@pytest.fixture(params=[(w, v) for v in ("2.2", "2.1") for w in ("lance_table", "pylance")])
def repeated(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    writer, version = request.param
    uri = str(tmp_path / "ds")
    write = lt.write_dataset if writer == "lance_table" else lance.write_dataset
    for i in range(12):
        write(_events(100 * i, 100, i), uri, mode="append" if i else "create", data_storage_version=version)
    return uri


def test_takes_and_scans_of_repeated_files_equal_pylance(repeated: str) -> None:
    theirs = lance.dataset(repeated)
    picks = [5, 1170, 3, 81, 82, 200, 1199, 0, 333, 81, 650]
    for _ in range(2):  # cold (layouts made), then with every caches' entries of the first
        clear_caches()
        ours = lt.dataset(repeated)
        assert ours.take(picks).equals(theirs.take(picks))
        for columns in (["tags", "load"], ["category", "source"]):
            assert ours.take(picks, columns=columns).equals(theirs.take(picks, columns=columns))
        assert ours.to_table().equals(theirs.to_table())


def test_a_layout_is_made_once_per_distinct_metadata(repeated: str) -> None:
    clear_caches()
    files = sorted((Path(repeated) / "data").iterdir())
    readers = [LanceFileReader(str(f)) for f in files]
    layouts = [small_layouts.layout(r, FIELDS) for r in readers]
    assert all(lay is not None for lay in layouts)
    for k, name in enumerate(FIELDS):
        # files of the same metadata for this field share its layout object
        blobs = {}
        for r, lay in zip(readers, layouts):
            index = [r._col_of[leaf] for leaf in _leaf_ids(r, name)]
            key = (lay.start, *(r.metadata.columns.blob(i) for i in index))  # type: ignore[union-attr]
            blobs.setdefault(key, []).append(lay.columns[k])  # type: ignore[union-attr]
        if name in ("id", "source", "payload"):
            assert len(blobs) < len(files)  # these repeat from file to file
        for same in blobs.values():
            assert all(c is same[0] for c in same)


def _leaf_ids(reader: LanceFileReader, name: str) -> list[int]:
    node = next(n for n in reader._roots if n.name == name)
    stack, out = [node], []
    while stack:
        n = stack.pop(0)
        if n.children:
            stack[:0] = n.children
        else:
            out.append(n.id)
    return out


def test_a_repeated_layout_is_not_given_to_a_file_too_short_for_it(repeated: str, tmp_path: Path) -> None:
    """A file whose column metadata is another's, but whose data ends before the buffers it
    describes, gets no layout from the other file's (its own reader reports it)."""
    clear_caches()
    first = sorted((Path(repeated) / "data").iterdir())[0]
    copy = tmp_path / "copy.lance"
    shutil.copy(first, copy)
    assert small_layouts.layout(LanceFileReader(str(first)), FIELDS) is not None
    again = LanceFileReader(str(copy))
    assert small_layouts.layout(again, FIELDS) is not None  # the same metadata: the kept layout
    short = LanceFileReader(str(copy))
    short.metadata.columns._limit = 64  # as if its data ended at byte 64
    assert small_layouts.layout(short, FIELDS) is None


def test_files_of_the_same_dictionary_decode_it_once(repeated: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files' dictionaries of the same bytes are decoded once for a batch (``category``:
    three distinct ones among twelve files, ``source``: one), all in one pass, with the rows
    pylance reads."""
    from lance_table.file.v2_1 import small_dicts

    calls: list[int] = []
    decoded = small_dicts._decoded_dictionaries

    def counted(cols: list[object], *args: object) -> object:
        calls.append(len(cols))
        return decoded(cols, *args)  # type: ignore[arg-type]

    def one_by_one(*args: object) -> object:
        raise AssertionError("string dictionaries are decoded together")

    monkeypatch.setattr(small_dicts, "_decoded_dictionaries", counted)
    monkeypatch.setattr(small_dicts, "_each_dictionary", one_by_one)
    theirs = lance.dataset(repeated)
    for column, most in (("category", 3), ("source", 1)):
        clear_caches()
        calls.clear()
        assert lt.dataset(repeated).to_table(columns=[column]).equals(theirs.to_table(columns=[column]))
        assert 0 < sum(calls) <= most
