"""Page encodings of ``LanceFileReader.metadata()`` in pylance's text, compared with pylance's own
on files of every format holding most page layouts and compressions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file import LanceFileReader
from lance_table.file.encoding_text import rust_debug

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop


def _table(n: int = 3000) -> pa.Table:
    rng = np.random.default_rng(3)
    words = pa.array([f"w{i % 50}" * (i % 7) for i in range(n)])
    packed = {"lance-encoding:packed": "true"}
    columns = {
        "ints": pa.array(rng.integers(0, 100, n).astype(np.int32)),
        "nullable": pa.array([None if i % 3 == 0 else i for i in range(n)], pa.int64()),
        "words": words,
        "long": pa.array(["x" * 300 + str(i) for i in range(n)]),
        "dict": pa.array([f"k{i % 5}" for i in range(n)]).dictionary_encode(),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=n * 4).astype(np.float32)), 4),
        "lists": pa.array([[i, i + 1] if i % 4 else None for i in range(n)]),
        "struct": pa.StructArray.from_arrays([pa.array(range(n)), words], names=["a", "b"]),
        "flags": pa.array([i % 3 == 0 for i in range(n)]),
        "nulls": pa.nulls(n, pa.int32()),
        "floats": pa.array(rng.normal(size=n)),
        "zstd": words,
        "fixed_packed": pa.StructArray.from_arrays(
            [pa.array(range(n)), pa.array(rng.normal(size=n))], names=["a", "b"]
        ),
    }
    meta = {"zstd": {"lance-encoding:compression": "zstd"}, "fixed_packed": packed}
    fields = [pa.field(k, v.type, metadata=meta.get(k)) for k, v in columns.items()]
    return pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields))


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_page_encodings_read_as_pylance_prints_them(tmp_path, version):
    table = _table()
    if version == "2.2":
        s = pa.array(["a", "", "ccc"] * 1000)
        var = pa.StructArray.from_arrays([pa.array(np.arange(3000), pa.int16()), s], names=["i", "s"])
        table = table.append_column(
            pa.field("var_packed", var.type, metadata={"lance-encoding:packed": "true"}), var
        )
    path = str(tmp_path / "f.lance")
    with lance_file.LanceFileWriter(path, table.schema, version=version) as w:
        w.write_batch(table)
    theirs = lance_file.LanceFileReader(path).metadata()
    ours = LanceFileReader(path).metadata()
    pairs = [
        (t.encoding, o.encoding)
        for tc, oc in zip(theirs.columns, ours.columns)
        for t, o in zip(tc.pages, oc.pages)
    ]
    assert len(pairs) == sum(len(c.pages) for c in theirs.columns) >= table.num_columns
    for t, o in pairs:
        assert o == t


def test_scalars_and_absent_messages():
    enc = pb.CompressiveEncoding()
    enc.general.compression.scheme = pb.COMPRESSION_ALGORITHM_ZSTD
    text = rust_debug(enc)
    assert "scheme: CompressionAlgorithmZstd," in text
    assert "level: None," in text and "values: None," in text
    enc.general.compression.level = 3
    assert "level: Some(\n" in rust_debug(enc)
    enc = pb.CompressiveEncoding()
    enc.fsst.symbol_table = b'a"\\\n\x00\x7f'
    assert 'symbol_table: b"a\\"\\\\\\n\\0\\x7f",' in rust_debug(enc)
