"""Reading files pylance writes in formats 2.1 and 2.2 (its default): every type, nested ones included."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal
from typecases import type_cases

from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import decode as decode21
from lance_table.file.v2_1 import miniblock_nested, nested_rows

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop


def _big_cases() -> dict[str, pa.Table]:
    """Data for which pylance picks its 2.1/2.2 compressions (they appear only on larger pages)."""
    rng = np.random.default_rng(0)
    n = 100_000
    mask = rng.random(n) < 0.2
    return {
        "bitpacked_ints": pa.table({"x": pa.array(rng.integers(0, 100, n), pa.int32())}),
        "sequence": pa.table({"x": pa.array(np.arange(n))}),
        "random_floats": pa.table({"x": pa.array(rng.random(n))}),
        "nullable_floats": pa.table({"x": pa.array(rng.random(n).astype(np.float32), mask=mask)}),
        "constant": pa.table({"x": pa.array(np.full(n, 7))}),
        "long_runs": pa.table({"x": pa.array(np.repeat(np.arange(n // 1000), 1000))}),
        "dictionary_strings": pa.table(
            {"s": pa.array(np.array(["a", "bb", "ccc"], dtype=object)[rng.integers(0, 3, n)])}
        ),
        "fsst_strings": pa.table({"s": pa.array([f"value-{i:012d}-x" for i in range(n)])}),
        "long_strings_full_zip": pa.table({"s": pa.array(["y" * 300 + str(i) for i in range(2000)])}),
        "nullable_binary": pa.table(
            {
                "b": pa.array(
                    [bytes(rng.integers(0, 256, i % 40, dtype=np.uint8)) for i in range(n)], mask=mask
                )
            }
        ),
        "bools": pa.table({"b": pa.array(rng.random(n) < 0.5)}),
        "small_vectors": pa.table(
            {"v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4)}
        ),
        "wide_vectors_full_zip": pa.table(
            {"v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(3000 * 128).astype(np.float32)), 128)}
        ),
        "all_null": pa.table({"x": pa.nulls(n, pa.int64())}),
    }


def _lists(rng: np.random.Generator, n: int, longest: int, item) -> list:
    """Lists of 1..longest items, with about 10% null and 10% empty lists."""
    out: list = []
    for u in rng.random(n):
        if u < 0.1:
            out.append(None)
        elif u < 0.2:
            out.append([])
        else:
            out.append([item(j) for j in range(int(rng.integers(1, longest)))])
    return out


def _nested_cases() -> dict[str, pa.Table]:
    """Lists and structs big enough to fill several mini-block chunks (and to go full-zip)."""
    rng = np.random.default_rng(1)
    n = 20_000
    wide = rng.random(128).astype(np.float32).tolist()
    return {
        "list_ints": pa.table({"l": pa.array(_lists(rng, n, 10, int), pa.list_(pa.int32()))}),
        "long_lists": pa.table(
            {"l": pa.array(_lists(rng, 400, 3000, lambda j: j * 7 % 1000), pa.list_(pa.int64()))}
        ),
        "lists_of_long_strings_full_zip": pa.table(
            {"l": pa.array(_lists(rng, 2000, 4, lambda j: "z" * 300 + str(j) if j % 3 else None))}
        ),
        "lists_of_vectors_full_zip": pa.table(
            {"l": pa.array(_lists(rng, 1000, 3, lambda j: wide), pa.list_(pa.list_(pa.float32(), 128)))}
        ),
        "struct_with_list": pa.table(
            {
                "s": pa.array(
                    [
                        None if i % 7 == 0 else {"x": None if i % 5 == 0 else list(range(i % 4)), "y": str(i)}
                        for i in range(n)
                    ],
                    pa.struct([("x", pa.list_(pa.int16())), ("y", pa.string())]),
                )
            }
        ),
        "list_struct_list": pa.table(
            {
                "l": pa.array(
                    [
                        None if i % 9 == 0 else [{"a": [i, None] if i % 2 else None}, None][: i % 3]
                        for i in range(n)
                    ],
                    pa.list_(pa.struct([("a", pa.list_(pa.int64()))])),
                )
            }
        ),
        "large_list_strings": pa.table(
            {"l": pa.array(_lists(rng, n, 5, lambda j: f"w{j}"), pa.large_list(pa.string()))}
        ),
        "nullable_long_strings_full_zip": pa.table(
            {"s": pa.array([None if i % 4 == 0 else "q" * 300 + str(i) for i in range(3000)])}
        ),
    }


NESTED_TYPES = {"list_int", "large_list", "list_struct", "list_list", "struct", "fsl_fsl"}
CASES = {**type_cases(), **_big_cases(), **_nested_cases()}


def _write(path, table: pa.Table, version: str) -> None:
    with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
        w.write_batch(table)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_we_read_what_pylance_writes(tmp_path, version, name):
    table = CASES[name]
    path = tmp_path / "f.lance"
    _write(path, table, version)
    reader = LanceFileReader(path)
    assert reader.version == version
    theirs = lance_file.LanceFileReader(str(path)).read_all().to_table()
    ours = reader.read_all()
    assert ours.equals(theirs)
    assert_tables_equal(ours, table, check_metadata=False)
    rng = np.random.default_rng(len(name))
    idx = rng.integers(0, table.num_rows, 50)
    assert_tables_equal(reader.take(idx), table.take(pa.array(idx)), check_metadata=False)
    lo = int(rng.integers(0, table.num_rows))
    assert_tables_equal(reader.read_range(lo, lo + 300), table.slice(lo, 300), check_metadata=False)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_maps_and_nullable_structs(tmp_path, version):
    """Maps (2.2 only: pylance refuses them in 2.1) and structs whose children have their own nulls."""
    n = 3000
    columns = {
        "s": pa.array(
            [None if i % 5 == 0 else {"a": None if i % 3 == 0 else i, "b": f"b{i}"} for i in range(n)],
            pa.struct([("a", pa.int32()), ("b", pa.string())]),
        ),
    }
    if version == "2.2":
        columns["m"] = pa.array(
            [
                None if i % 6 == 0 else [(f"k{j}", None if j == 1 else j) for j in range(i % 4)]
                for i in range(n)
            ],
            pa.map_(pa.string(), pa.int32()),
        )
        # no null or empty maps, but values that are null, also in a row's first entry
        columns["m_valid"] = pa.array(
            [[(f"k{j}", None if (i + j) % 3 == 0 else f"v{j}") for j in range(1 + i % 3)] for i in range(n)],
            pa.map_(pa.string(), pa.string()),
        )
    table = pa.table(columns)
    path = tmp_path / "f.lance"
    _write(path, table, version)
    reader = LanceFileReader(path)
    theirs = lance_file.LanceFileReader(str(path)).read_all().to_table()
    assert reader.read_all().equals(theirs)
    assert_tables_equal(reader.read_all(), table, check_metadata=False)
    idx = np.random.default_rng(2).integers(0, n, 200)
    assert_tables_equal(reader.take(idx), table.take(pa.array(idx)), check_metadata=False)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_take_of_lists_decodes_only_the_chunks_holding_the_rows(tmp_path, version, monkeypatch):
    """The repetition index says which mini-block chunks hold a row (and where a row runs on into
    the next chunks); a take decodes just those, and still returns whole lists."""
    rng = np.random.default_rng(3)
    table = pa.table({"l": pa.array(_lists(rng, 50_000, 40, int), pa.list_(pa.int64()))})
    path = tmp_path / "f.lance"
    _write(path, table, version)
    decoded = []
    real = miniblock_nested.read_chunks

    def spy(layout, io, chunks, chosen, large):
        decoded.append((chosen.size, chunks.counts.size))
        return real(layout, io, chunks, chosen, large)

    monkeypatch.setattr(miniblock_nested, "read_chunks", spy)
    # the rows of several pages are read together (nested_rows): its chunks parsed and its pages' chunks
    real_parse, real_tables = nested_rows.parse_chunks, nested_rows._tables

    def spy_parse(layout, data, starts, ends, counts, *args):
        decoded.append((starts.size, 0))
        return real_parse(layout, data, starts, ends, counts, *args)

    def spy_tables(minis, ios, large):
        got = real_tables(minis, ios, large)
        decoded.append((0, 0 if got is None else got[0].size))
        return got

    monkeypatch.setattr(nested_rows, "parse_chunks", spy_parse)
    monkeypatch.setattr(nested_rows, "_tables", spy_tables)
    reader = LanceFileReader(path)
    for _ in range(30):
        decoded.clear()
        idx = rng.integers(0, table.num_rows, 5)
        assert_tables_equal(reader.take(idx), table.take(pa.array(idx)), check_metadata=False)
        assert sum(d for d, _ in decoded) <= 5 * 3, decoded  # a row spans at most a few chunks
        assert sum(total for _, total in decoded) > 50
        lo = int(rng.integers(0, table.num_rows - 1000))
        got = reader.read_range(lo, lo + 1000)
        assert_tables_equal(got, table.slice(lo, 1000), check_metadata=False)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_random_damage_to_nested_pages_gives_typed_errors(tmp_path, version):
    """Overwrite random bytes of the page data: results may be wrong, errors must be typed."""
    table = _nested_cases()["list_struct_list"].slice(0, 2000)
    table = table.append_column("m", pa.array(_lists(np.random.default_rng(4), 2000, 6, str)))
    path = tmp_path / "good.lance"
    _write(path, table, version)
    data = path.read_bytes()
    meta_start = struct.unpack_from("<Q", data, len(data) - 40)[0]
    rng = np.random.default_rng(0)
    for trial in range(200):
        damaged = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            damaged[int(rng.integers(0, meta_start))] = int(rng.integers(0, 256))
        bad = tmp_path / "bad.lance"
        bad.write_bytes(bytes(damaged))
        try:
            reader = LanceFileReader(bad)
            reader.read_all()
            reader.take([0, 1999, 5])
        except (CorruptFileError, UnsupportedFormatError):
            pass
        except Exception as exc:  # pragma: no cover - reported with the trial number
            raise AssertionError(f"trial {trial}: untyped {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_blob_columns(tmp_path, version):
    """Blob columns: descriptors in an inner page, the bytes elsewhere; a take fetches only its blobs."""
    from test_io import CountingSource

    n = 300
    blobs = [bytes([i % 251]) * (20_000 + i) if i % 4 else (None if i % 8 else b"") for i in range(n)]
    field = pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    table = pa.table({"id": pa.array(np.arange(n)), "b": pa.array(blobs, pa.large_binary())})
    table = table.cast(pa.schema([pa.field("id", pa.int64()), field]))
    path = tmp_path / "f.lance"
    _write(path, table, version)
    reader = LanceFileReader(path)
    assert reader.metadata.columns[1].pages[0].encoding is not None
    theirs = lance_file.LanceFileReader(str(path)).read_all().to_table()
    assert reader.read_all().equals(theirs)
    assert_tables_equal(reader.read_all(), table, check_metadata=False)
    source = CountingSource(path.read_bytes())
    counted = LanceFileReader(source)
    idx = [5, 250, 3, 8]
    assert_tables_equal(counted.take(idx, ["b"]), table.select(["b"]).take(idx), check_metadata=False)
    assert source.bytes_read < 4 * 64 * 1024 + 4 * 21_000  # the blobs, the descriptors, small gaps


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_take_reads_only_the_chunks_holding_the_rows(tmp_path, version):
    """A take of a few rows from big mini-block pages (FSST strings, vectors, bitpacked ints)
    fetches those rows' chunks, not the pages."""
    from test_io import CountingSource

    n = 200_000
    rng = np.random.default_rng(11)
    letters = rng.integers(97, 123, n * 20, dtype=np.uint8)
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * 20).tobytes())
    table = pa.table(
        {
            "text": pa.Array.from_buffers(pa.string(), n, [None, offsets, pa.py_buffer(letters.tobytes())]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8),
            "x": pa.array(rng.integers(0, 1 << 40, n)),
        }
    )
    path = tmp_path / "f.lance"
    _write(path, table, version)
    idx = [7, 150_001, 99_999, 42_424, 7]
    for column in table.column_names:
        source = CountingSource(path.read_bytes())
        got = LanceFileReader(source).take(idx, [column])
        assert_tables_equal(got, table.select([column]).take(idx), check_metadata=False)
        page_bytes = table.column(column).nbytes
        assert source.bytes_read < page_bytes / 10, (column, source.bytes_read, page_bytes)


def test_an_unknown_page_layout_is_refused_by_number():
    """A layout from a newer format (e.g. 2.3's planar layout) is named, not misread."""
    from lance_table._proto import encodings_v2_1_pb2, file2_pb2
    from lance_table.file import BytesSource
    from lance_table.file.pageio import PageIO
    from lance_table.file.runs import Runs

    layout = encodings_v2_1_pb2.PageLayout()
    layout.ParseFromString(bytes([0x2A, 0x00]))  # field 5, empty: not a layout we know
    page = file2_pb2.ColumnMetadata.Page(length=3)
    io = PageIO(BytesSource(b"", name="x.lance"), page, file2_pb2.ColumnMetadata(), (), "column 0 page 0")
    for decode in (decode21.decode_page, decode21.decode_nested_page):
        arg = pa.int32() if decode is decode21.decode_page else [pa.field("x", pa.int32())]
        with pytest.raises(UnsupportedFormatError, match="page layout number 5"):
            decode(layout, io, arg, True, Runs.span(0, 3))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_constant_strings_with_and_without_nulls(tmp_path, version):
    """2.2 keeps a constant string in a page buffer ahead of the level buffers."""
    n = 50_000
    table = pa.table(
        {
            "s": pa.array(["same-value"] * n),
            "e": pa.array([""] * n),
            "sn": pa.array(["v" if i % 3 else None for i in range(n)]),
            "st": pa.array(
                [{"a": "k"} if i % 2 else None for i in range(n)], pa.struct([("a", pa.string())])
            ),
        }
    )
    path = tmp_path / "f.lance"
    _write(path, table, version)
    reader = LanceFileReader(path)
    if version == "2.2":
        from lance_table.file.inspect import describe

        assert describe(str(path)).count("constant_layout") == 4
    assert reader.read_all().equals(lance_file.LanceFileReader(str(path)).read_all().to_table())
    assert_tables_equal(reader.read_all(), table, check_metadata=False)
    idx = [0, 1, 5, n - 1]
    assert_tables_equal(reader.take(idx), table.take(idx), check_metadata=False)
