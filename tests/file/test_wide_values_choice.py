"""Which form the 2.1/2.2 writer gives binary and string values too wide for plain mini-block
chunks (a value of 256 bytes or more), and that pylance reads each form back exactly.

* strings of 1 KiB or more on average, and compressible binaries: zstd per value (full-zip);
* incompressible binaries: plain (full-zip), as pylance stores them;
* few distinct values: a mini-block dictionary, as pylance writes them;
* 2.2, values of a few hundred bytes: zstd-compressed mini-block chunks; 2.1: FSST (strings) or
  zstd per value (binaries), full-zip;
* a field asking for no compression: plain, full-zip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

from lance_table.file.compression import general
from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import fullzip_values, values_encode
from lance_table.file.writer import LanceFileWriter
from lance_table.storage.sources import LocalFileSource

pytestmark = pytest.mark.interop

_WORDS = np.array(b"the of and to in is was that for on with from by at this are be it as an".split())


def _text(rng: np.random.Generator, lengths: np.ndarray) -> list[bytes]:
    """Values of words, each cut to its length."""
    out = []
    for n in lengths.tolist():
        words = _WORDS[rng.integers(0, _WORDS.size, n // 2 + 1)]
        out.append(b" ".join(words.tolist())[:n])
    return out


def _form(path: Path) -> list[str]:
    """Each page's layout, its top value compression, and ``+dictionary`` when it has one."""
    source = LocalFileSource(str(path))
    out = []
    for col in read_metadata(source).columns:
        for p, page in enumerate(col.pages):
            _, layout = unpack_encoding(page.encoding, source, f"page {p}")
            kind = layout.WhichOneof("layout")
            if kind == "mini_block_layout" and layout.mini_block_layout.HasField("dictionary"):
                out.append(f"{kind}+dictionary")
                continue
            enc = getattr(layout, kind).value_compression
            top = enc.WhichOneof("compression")
            if top == "general":
                top = f"general/{general.SCHEMES_BY_NUMBER[enc.general.compression.scheme]}"
            out.append(f"{kind}:{top}")
    return out


def _cases() -> dict[str, tuple[pa.Table, str, str]]:
    """name: (table, form in 2.1, form in 2.2)."""
    rng = np.random.default_rng(5)
    long_text = _text(rng, rng.integers(2048, 4096, 30))
    mid_text = _text(rng, rng.integers(300, 600, 160))
    mid_nulls = pa.array([None if i % 7 == 0 else v.decode() for i, v in enumerate(mid_text)], pa.string())
    distinct = _text(rng, rng.integers(1024, 2048, 5))
    repeated = [distinct[i] for i in rng.integers(0, 5, 300).tolist()]
    random_bin = [rng.bytes(int(n)) for n in rng.integers(1024, 2048, 40)]
    fz, mb = "full_zip_layout", "mini_block_layout"
    none = pa.schema([pa.field("s", pa.string(), metadata={"lance-encoding:compression": "none"})])
    return {
        "long strings": (
            pa.table({"s": pa.array([v.decode() for v in long_text])}),
            f"{fz}:general/zstd",
            f"{fz}:general/zstd",
        ),
        "long strings with nulls": (
            pa.table({"s": pa.array([None if i % 3 else v.decode() for i, v in enumerate(long_text * 3)])}),
            f"{fz}:general/zstd",
            f"{fz}:general/zstd",
        ),
        "random binaries": (pa.table({"s": pa.array(random_bin)}), f"{fz}:variable", f"{fz}:variable"),
        "mid strings": (
            pa.table({"s": pa.array([v.decode() for v in mid_text])}),
            f"{fz}:fsst",
            f"{mb}:general/zstd",
        ),
        "mid strings with nulls": (pa.table({"s": mid_nulls}), f"{fz}:fsst", f"{mb}:general/zstd"),
        "mid binaries": (pa.table({"s": pa.array(mid_text)}), f"{fz}:general/zstd", f"{mb}:general/zstd"),
        "mid large strings": (
            pa.table({"s": pa.array([v.decode() for v in mid_text], pa.large_string())}),
            f"{fz}:general/zstd",  # FSST takes 32-bit offsets only
            f"{mb}:general/zstd",
        ),
        "mid strings in lists": (
            pa.table({"s": pa.array([[v.decode() for v in mid_text[i : i + 3]] for i in range(0, 160, 3)])}),
            f"{fz}:fsst",
            f"{mb}:general/zstd",
        ),
        "repeated long strings": (
            pa.table({"s": pa.array([v.decode() for v in repeated])}),
            f"{mb}+dictionary",
            f"{mb}+dictionary",
        ),
        "no compression asked": (
            pa.table([pa.array([v.decode() for v in mid_text])], schema=none),
            f"{fz}:variable",
            f"{fz}:variable",
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_wide_values_form_and_pylance_reads_them(tmp_path: Path, name: str, version: str) -> None:
    lance_file = pytest.importorskip("lance.file")
    table, form21, form22 = CASES[name]
    path = tmp_path / "ours.lance"
    with LanceFileWriter(path, table.schema, version=version) as w:
        w.write(table)
    assert _form(path) == [form21 if version == "2.1" else form22]
    assert_tables_equal(lance_file.LanceFileReader(str(path)).read_all().to_table(), table)
    ours = LanceFileReader(path)
    assert_tables_equal(ours.read_all(), table)
    rows = [0, len(table) // 2, len(table) - 1]
    assert_tables_equal(ours.take(rows), table.take(rows))


def test_choose_by_size_kind_and_scheme() -> None:
    """The full-zip choice alone: small pages plain, a value over 32 KiB always zstd, strings
    under 1 KiB on average FSST unless a scheme is named, incompressible bytes plain."""
    rng = np.random.default_rng(3)

    def parts(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int64)
        return offsets, np.frombuffer(b"".join(values), np.uint8)

    text = parts(_text(rng, np.full(100, 500)))
    long_text = parts(_text(rng, np.full(40, 1500)))
    noise = parts([rng.bytes(1500) for _ in range(40)])
    huge_noise = parts([rng.bytes(40_000)])
    small = parts(_text(rng, np.full(20, 500)))
    choose = fullzip_values.choose
    assert choose(*text, fsst=True, scheme=None) == "fsst"
    assert choose(*text, fsst=True, scheme="lz4") == "zstd"
    assert choose(*text, fsst=False, scheme=None) == "zstd"
    assert choose(*text, fsst=True, scheme="none") == "plain"
    assert choose(*long_text, fsst=True, scheme=None) == "zstd"
    assert choose(*noise, fsst=False, scheme=None) == "plain"
    assert choose(*huge_noise, fsst=False, scheme=None) == "zstd"  # pylance's rule over 32 KiB
    assert choose(*small, fsst=True, scheme=None) == "plain"  # under 32 KiB, as pylance
    assert fullzip_values.zstd_chunks_pay(*text, 8192)
    assert not fullzip_values.zstd_chunks_pay(*long_text, 8192)  # 1 KiB or more: per value
    assert not fullzip_values.zstd_chunks_pay(*parts([rng.bytes(500) for _ in range(100)]), 8192)


@pytest.mark.parametrize(
    ("distinct", "many"), [(40_000, True), (20_000, False), (18_000, False), (500, False)]
)
def test_second_look_at_cardinality(distinct: int, many: bool) -> None:
    """The larger sample rules a dictionary out only for pages of more than n / 2 distinct values:
    at exactly n / 2 (each value twice, the hardest case) it must not."""
    rng = np.random.default_rng(distinct)
    keys = rng.permutation(np.arange(40_000) % distinct)
    values = pa.array([f"key-{k}" for k in keys.tolist()])
    assert values_encode._many_distinct(values) is many
    if not many:
        assert not values_encode._surely_high_cardinality(values)


@pytest.mark.parametrize("n", [1 << 15, 100_003])
def test_second_look_draws_an_eighth_of_the_rows(n: int) -> None:
    rows = values_encode._eighth_of_rows(n)
    assert rows.size and rows[0] >= 0 and rows[-1] < n and bool(np.all(np.diff(rows) > 0))
    assert abs(rows.size - n / 8) < 5 * np.sqrt(n / 8)
    assert np.array_equal(rows, values_encode._eighth_of_rows(n))  # seeded: the same every time
