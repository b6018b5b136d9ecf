"""Full-zip pages of long strings (pylance's layout for values of a few hundred bytes): a read of
a few rows fetches and decodes only their entries, and many ranges in order are joined in one
pass. Results are compared with pylance and with the Arrow data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import write_file

from lance_table.file.compression import fsst
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import batch, byteranges, decode

ROWS = 3_000


def _table() -> pa.Table:
    """Long values: FSST-friendly text (with nulls and empty strings) and random bytes."""
    rng = np.random.default_rng(21)
    words = np.array([f"w{i:04d}" for i in range(800)], dtype=object)
    text = [" ".join(words[rng.integers(0, 800, 60)]) for _ in range(ROWS)]
    text = ["" if i % 97 == 5 else t for i, t in enumerate(text)]
    raw = [bytes(rng.integers(0, 256, int(rng.integers(250, 400)), dtype=np.uint8)) for _ in range(ROWS)]
    return pa.table(
        {
            "text": pa.array(text, pa.string(), mask=rng.random(ROWS) < 0.1),
            "plain": pa.array(text, pa.large_string()),
            "raw": pa.array(raw, pa.binary()),
        }
    )


def _layouts(path: Path) -> dict[int, str]:
    reader = LanceFileReader(path)
    reader.read_range(0, 1)
    return {k: str(col.encoding(0, reader._source)) for k, col in reader._columns.items()}


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_take_of_long_strings_decodes_only_their_rows(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lance_file = pytest.importorskip("lance.file")
    table = _table()
    path = tmp_path / "long.lance"
    write_file(path, table, version, "pylance")
    layouts = _layouts(path)
    assert all(text.startswith("full_zip_layout") for text in layouts.values()), layouts
    assert "fsst" in layouts[0] and "fsst" not in layouts[2]

    walked: list[int] = []  # entries parsed per full-zip walk
    decoded: list[int] = []  # strings FSST-decoded per call
    real_walk, real_decode = decode._walk_full_zip, fsst.decode_text

    def walk(layout, io, u8, bounds=None):  # type: ignore[no-untyped-def]
        entries = real_walk(layout, io, u8, *([] if bounds is None else [bounds]))
        walked.append(int(entries.visible.size))
        return entries

    def fsst_decode(table, data, offsets):  # type: ignore[no-untyped-def]
        decoded.append(len(offsets) - 1)
        return real_decode(table, data, offsets)

    monkeypatch.setattr(decode, "_walk_full_zip", walk)
    monkeypatch.setattr(fsst, "decode_text", fsst_decode)
    theirs = lance_file.LanceFileReader(str(path))
    rng = np.random.default_rng(4)
    for picks in ([0], [ROWS - 1], [5, 6, 7, 8], sorted(rng.choice(ROWS, 200, replace=False).tolist())):
        walked.clear()
        decoded.clear()
        got = LanceFileReader(path).take(picks)
        assert got.equals(table.take(picks))
        assert got.equals(theirs.take_rows(picks).to_table())
        assert walked and max(walked) == len(picks)  # only the rows taken were parsed ...
        assert decoded and max(decoded) <= len(picks)  # ... and decompressed
    # a span of rows, however long (a scan's share of a page), is read as one range
    walked.clear()
    assert LanceFileReader(path).read_range(100, 2_100).equals(table.slice(100, 2_000))
    assert max(walked) == 2_000
    # scattered rows that are a large share of the page are read with all rows between them
    walked.clear()
    many = np.arange(0, ROWS, 2).tolist()
    assert LanceFileReader(path).take(many).equals(table.take(many))
    assert max(walked) >= ROWS - 1
    assert LanceFileReader(path).read_all().equals(table)


def test_join_of_ranges_in_order_matches_slice_by_slice() -> None:
    """Many ranges in order (gaps and empty ranges allowed) are joined in one pass; ranges out of
    order, overlapping or past the data fall back to joining each slice."""
    rng = np.random.default_rng(8)
    data = rng.integers(0, 256, 400_000, dtype=np.uint8).tobytes()

    def slow(starts: np.ndarray, lengths: np.ndarray) -> bytes:
        return b"".join(data[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist()))

    n = 1_000
    lengths = rng.integers(0, 300, n)
    lengths[::7] = 0
    gaps = rng.integers(0, 5, n)
    starts = np.cumsum(gaps) + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    assert int(starts[-1] + lengths[-1]) <= len(data)
    shuffled = rng.permutation(n)
    cases = {
        "in order": (starts, lengths),
        "no gaps": (np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths),
        "out of order": (starts[shuffled], lengths[shuffled]),
        "overlapping": (starts // 2, lengths),
        "past the data": (starts + len(data) - int(starts[-1]) - 10, lengths),
    }
    for name, (s, n_) in cases.items():
        s64, n64 = s.astype(np.int64), n_.astype(np.int64)
        assert bytes(batch.join(memoryview(data), s64, n64)) == slow(s, n_), name
    fast = byteranges._arrow_join(data, starts.astype(np.int64), lengths.astype(np.int64))
    assert fast is not None and bytes(fast) == slow(starts, lengths)
    back = starts[shuffled].astype(np.int64), lengths[shuffled].astype(np.int64)
    assert byteranges._arrow_join(data, *back) is None
