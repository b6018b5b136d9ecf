"""pylance's file API (``lance.file``) in lance_table.file: files written by either library read by
the other with full contents compared, the same calls answered the same way, and writers that
leave no truncated file behind."""

from __future__ import annotations

import gc
import os
import pickle

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file import LanceFileReader, LanceFileWriter, ReaderResults

lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")
lance_arrow = pytest.importorskip("lance.arrow")

pytestmark = pytest.mark.interop
VERSIONS = ["2.0", "2.1", "2.2"]


def _table(n: int = 5000) -> pa.Table:
    rng = np.random.default_rng(7)
    ids = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": pa.array(rng.random(n)),
            "s": pa.array([f"value-{i}" if i % 11 else None for i in ids.tolist()]),
            "tags": pa.array([["a", "b", "c"][: i % 4] for i in ids.tolist()], pa.list_(pa.string())),
            "st": pa.StructArray.from_arrays(
                [pa.array(ids.astype(np.int32)), pa.array(rng.random(n).astype(np.float32))], names=["i", "f"]
            ),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4),
        }
    )


def _write(lib, path, table, **kwargs):
    writer = lib.LanceFileWriter(str(path), **kwargs)
    for batch in table.to_batches(max_chunksize=1500):
        writer.write_batch(batch)
    return writer.close(), writer.size_bytes


@pytest.mark.parametrize("version", [*VERSIONS, None])
def test_files_cross_between_the_libraries(tmp_path, version):
    table = _table()
    kwargs = {} if version is None else {"version": version}
    assert _write(lt.file, tmp_path / "ours.lance", table, **kwargs)[0] == table.num_rows
    assert _write(lance_file, tmp_path / "theirs.lance", table, **kwargs)[0] == table.num_rows
    for name in ("ours.lance", "theirs.lance"):
        for lib in (lt.file, lance_file):
            reader = lib.LanceFileReader(str(tmp_path / name))
            assert reader.num_rows() == table.num_rows
            assert reader.read_all().to_table().equals(table), (name, lib)
            assert reader.read_range(1200, 900).to_table().equals(table.slice(1200, 900))
            rows = [0, 3, 1499, 1500, 4999]
            assert reader.take_rows(rows).to_table().equals(table.take(rows))
    ours = LanceFileReader(str(tmp_path / "ours.lance")).metadata()
    theirs = lance_file.LanceFileReader(str(tmp_path / "theirs.lance")).metadata()
    assert (ours.major_version, ours.minor_version) == (theirs.major_version, theirs.minor_version)
    assert ours.schema == theirs.schema and ours.num_rows == theirs.num_rows
    assert len(ours.columns) == len(theirs.columns)
    if version is None:  # pylance's default is 2.2 ("stable"), ours too
        assert (ours.major_version, ours.minor_version) == (2, 2)


def test_reader_results_batches_and_projection(tmp_path):
    table = _table()
    _write(lance_file, tmp_path / "f.lance", table)
    for lib in (lt.file, lance_file):
        reader = lib.LanceFileReader(str(tmp_path / "f.lance"), columns=["s", "id"])
        batches = list(reader.read_all(batch_size=1000).to_batches())
        assert [b.num_rows for b in batches] == [1000] * 5
        assert pa.Table.from_batches(batches).equals(table.select(["s", "id"]))
        assert [b.num_rows for b in reader.read_range(10, 2500, batch_size=1000).to_batches()] == [
            1000,
            1000,
            500,
        ]
    assert isinstance(LanceFileReader(str(tmp_path / "f.lance")).read_all(), ReaderResults)


def test_metadata_and_statistics_match_pylance_for_its_file(tmp_path):
    table = _table()
    _write(lance_file, tmp_path / "f.lance", table, version="2.1")
    ours = LanceFileReader(str(tmp_path / "f.lance"))
    theirs = lance_file.LanceFileReader(str(tmp_path / "f.lance"))
    a, b = ours.metadata(), theirs.metadata()
    for name in ("num_rows", "num_data_bytes", "num_column_metadata_bytes", "num_global_buffer_bytes"):
        assert getattr(a, name) == getattr(b, name), name
    assert [(g.position, g.size) for g in a.global_buffers] == [
        (g.position, g.size) for g in b.global_buffers
    ]
    for ca, cb in zip(a.columns, b.columns):
        assert [(x.position, x.size) for x in ca.column_buffers] == [
            (x.position, x.size) for x in cb.column_buffers
        ]
        assert [[(x.position, x.size) for x in p.buffers] for p in ca.pages] == [
            [(x.position, x.size) for x in p.buffers] for p in cb.pages
        ]
        assert all(p.encoding for p in ca.pages)
    sa, sb = ours.file_statistics(), theirs.file_statistics()
    assert [(c.num_pages, c.size_bytes) for c in sa.columns] == [
        (c.num_pages, c.size_bytes) for c in sb.columns
    ]


def test_schema_metadata_and_global_buffers(tmp_path):
    table = _table(10)
    for lib, name in ((lt.file, "ours.lance"), (lance_file, "theirs.lance")):
        with lib.LanceFileWriter(str(tmp_path / name), table.schema) as writer:
            writer.write_batch(table)
            writer.add_schema_metadata("owner", "me")
            assert writer.add_global_buffer(b"first") == 1
            assert writer.add_global_buffer(b"second") == 2
    for name in ("ours.lance", "theirs.lance"):
        for lib in (lt.file, lance_file):
            reader = lib.LanceFileReader(str(tmp_path / name))
            assert reader.metadata().schema.metadata == {b"owner": b"me"}
            assert reader.read_global_buffer(1) == b"first" and reader.read_global_buffer(2) == b"second"
            assert reader.read_all().to_table().equals(table)


@pytest.mark.parametrize("version", VERSIONS)
def test_max_page_bytes_and_compression_hint_as_pylance_writes_them(tmp_path, version):
    rng = np.random.default_rng(0)
    n = 100_000
    hint = {"lance-encoding:compression": "zstd"}
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("s", pa.string(), metadata=hint)])
    table = pa.table(
        [pa.array(rng.integers(0, 2**60, n)), pa.array([f"value-{i}" for i in rng.integers(0, 10**9, n)])],
        schema=schema,
    )
    for lib, name in ((lt.file, "ours.lance"), (lance_file, "theirs.lance")):
        with lib.LanceFileWriter(str(tmp_path / name), version=version, max_page_bytes=64 * 1024) as w:
            w.write_batch(table)
    ours = lance_file.LanceFileReader(str(tmp_path / "ours.lance"))
    assert ours.read_all().to_table().equals(table)
    assert LanceFileReader(str(tmp_path / "theirs.lance")).read_all().to_table().equals(table)
    mine = LanceFileReader(str(tmp_path / "ours.lance")).metadata()
    # pylance splits 2.0 pages at max_page_bytes, 2.1+ pages only when reading; so do we
    theirs = lance_file.LanceFileReader(str(tmp_path / "theirs.lance")).metadata()
    assert [len(c.pages) for c in mine.columns] == [len(c.pages) for c in theirs.columns]
    assert (len(mine.columns[0].pages) > 1) == (version == "2.0")
    # the hint compresses the strings' bytes in every version
    assert all("zstd" in p.encoding.lower() for p in mine.columns[1].pages)
    plain = tmp_path / "plain.lance"
    with LanceFileWriter(str(plain), version=version) as w:
        w.write_batch(table.cast(pa.schema([pa.field("a", pa.int64()), pa.field("s", pa.string())])))
    if version != "2.2":  # (2.2 picks its own compression of strings without a hint)
        assert os.path.getsize(tmp_path / "ours.lance") < os.path.getsize(plain)


def test_compression_none_hint_of_pylance_2_0_files_reads(tmp_path):
    schema = pa.schema([pa.field("s", pa.string(), metadata={"lance-encoding:compression": "none"})])
    table = pa.table([pa.array(["a", None, "ccc"] * 100)], schema=schema)
    with lance_file.LanceFileWriter(str(tmp_path / "f.lance"), version="2.0") as w:
        w.write_batch(table)
    assert LanceFileReader(str(tmp_path / "f.lance")).read_all().to_table().equals(table)
    with LanceFileWriter(str(tmp_path / "g.lance"), version="2.0") as w:
        w.write_batch(table)
    assert lance_file.LanceFileReader(str(tmp_path / "g.lance")).read_all().to_table().equals(table)


def test_extension_types_through_the_file_api(tmp_path):
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(12, dtype=np.float32).reshape(3, 2, 2))
    table = pa.table(
        {
            "j": pa.array(['{"b":1,"a":[2]}', None, "3.5"], pa.json_()),
            "t": tensors,
            "bf": lance_arrow.bfloat16_array([1.0, None, 2.5]),
        }
    )
    for lib, name in ((lt.file, "ours.lance"), (lance_file, "theirs.lance")):
        with lib.LanceFileWriter(str(tmp_path / name)) as w:
            w.write_batch(table)
    expected = lance_file.LanceFileReader(str(tmp_path / "theirs.lance")).read_all().to_table()
    assert expected["j"].type == pa.large_binary()  # pylance's file API gives JSON as stored JSONB
    for name in ("ours.lance", "theirs.lance"):
        for lib in (lt.file, lance_file):
            got = lib.LanceFileReader(str(tmp_path / name)).read_all().to_table()
            assert got.schema == expected.schema and got.equals(expected), (name, lib)


def test_errors_are_pylances_builtins(tmp_path):
    table = _table(100)
    _write(lt.file, tmp_path / "f.lance", table)
    reader = LanceFileReader(str(tmp_path / "f.lance"))
    with pytest.raises(ValueError, match="ascending"):
        reader.take_rows([5, 1])
    with pytest.raises(lt.RowRangeError) as info:
        reader.read_range(90, 20)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError):
        reader.take_rows([100])
    with pytest.raises(lt.LanceFileNotFoundError) as missing:
        LanceFileReader(str(tmp_path / "nope.lance"))
    assert isinstance(missing.value, FileNotFoundError) and isinstance(missing.value, ValueError)
    with pytest.raises(ValueError):  # what pylance raises for a missing file
        lance_file.LanceFileReader(str(tmp_path / "nope.lance"))
    writer = LanceFileWriter(str(tmp_path / "g.lance"), table.schema)
    with pytest.raises(lt.SchemaError) as wrong:
        writer.write_batch(pa.table({"zz": [1]}))
    assert isinstance(wrong.value, ValueError)
    with pytest.raises(NotImplementedError):
        LanceFileWriter(str(tmp_path / "h.lance"), version="legacy")
    with pytest.raises(lt.UnsupportedOperationError, match="unknown_option"):
        LanceFileWriter(str(tmp_path / "h.lance"), unknown_option=1)
    empty = LanceFileWriter(str(tmp_path / "empty.lance"))
    with pytest.raises(ValueError, match="schema"):
        empty.close()
    assert not (tmp_path / "empty.lance").exists()
    assert pickle.loads(pickle.dumps(missing.value)).args == missing.value.args


def test_a_writer_that_is_not_closed_leaves_no_file(tmp_path):
    table = _table(2000)
    path = tmp_path / "dropped.lance"
    writer = LanceFileWriter(str(path), table.schema)
    writer.write_batch(table)
    del writer
    gc.collect()
    assert not path.exists() and os.listdir(tmp_path) == []

    with pytest.raises(RuntimeError, match="boom"), LanceFileWriter(str(path)) as w:
        w.write_batch(table)
        raise RuntimeError("boom")
    assert not path.exists() and os.listdir(tmp_path) == []

    # an existing file is replaced only when the new one is complete
    _write(lt.file, path, table.slice(0, 10))
    with pytest.raises(RuntimeError), LanceFileWriter(str(path)) as w:
        w.write_batch(table)
        raise RuntimeError("boom")
    assert LanceFileReader(str(path)).read_all().to_table().equals(table.slice(0, 10))
    assert os.listdir(tmp_path) == ["dropped.lance"]


def test_memory_urls(tmp_path):
    table = _table(300)
    uri = f"memory://file-api-{os.getpid()}/dir/f.lance"
    writer = LanceFileWriter(uri)
    writer.write_batch(table)
    assert writer.close() == 300 and writer.size_bytes > 0
    assert writer.close() is None  # closing twice is a no-op, as in pylance
    assert LanceFileReader(uri).read_all().to_table().equals(table)
    dropped = f"memory://file-api-{os.getpid()}/dir/g.lance"
    w = LanceFileWriter(dropped, table.schema)
    w.write_batch(table)
    del w
    gc.collect()
    with pytest.raises(FileNotFoundError):
        LanceFileReader(dropped)


@pytest.mark.s3
def test_s3_files_and_aborted_uploads(s3_uri, s3_options):
    table = _table(20_000)
    uri = f"{s3_uri}/f.lance"
    with LanceFileWriter(uri, storage_options=s3_options) as w:
        w.write_batch(table)
    assert lance_file.LanceFileReader(uri, storage_options=s3_options).read_all().to_table().equals(table)
    assert LanceFileReader(uri, storage_options=s3_options).read_all().to_table().equals(table)
    # a writer that fails mid-way (pages already uploaded in parts) leaves no object
    big = pa.table({"b": pa.array([os.urandom(1024) for _ in range(12_000)], pa.binary())})
    failed = f"{s3_uri}/failed.lance"
    with pytest.raises(RuntimeError), LanceFileWriter(failed, storage_options=s3_options, version="2.0") as w:
        w.write_batch(big)
        raise RuntimeError("boom")
    with pytest.raises(FileNotFoundError):
        LanceFileReader(failed, storage_options=s3_options)


def test_stable_version_is_pylances() -> None:
    import lance.file

    from lance_table.file import stable_version

    assert stable_version() == lance.file.stable_version()
