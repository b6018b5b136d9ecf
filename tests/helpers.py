"""Assertions shared by the tests."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


def _plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every dictionary replaced by its value type."""
    if pa.types.is_dictionary(t):
        return _plain_type(t.value_type)
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_plain_type(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_plain_type(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_plain_type(t.value_type)), t.list_size)
    return t


def _decode_dictionaries(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    plain = _plain_type(arr.type)
    return arr if plain == arr.type else arr.cast(plain)


def assert_tables_equal(actual: pa.Table, expected: pa.Table, *, check_metadata: bool = True) -> None:
    """Full-content equality; dictionary columns compare by their decoded values.

    (Lance stores a null dictionary index as an index to a null item, so the dictionaries may differ
    while the values are the same.)
    """
    assert actual.schema.names == expected.schema.names
    assert actual.num_rows == expected.num_rows, (actual.num_rows, expected.num_rows)
    for name in expected.column_names:
        a, e = actual[name], expected[name]
        assert a.type == e.type, f"{name}: type {a.type} != {e.type}"
        a2, e2 = _decode_dictionaries(a), _decode_dictionaries(e)
        if not a2.equals(e2):
            for i in range(len(e2)):
                if not a2[i].equals(e2[i]):
                    raise AssertionError(f"column {name} differs first at row {i}: {a2[i]} != {e2[i]}")
            raise AssertionError(f"column {name} differs")
    if check_metadata:
        assert actual.schema.equals(expected.schema, check_metadata=True), (actual.schema, expected.schema)


def race_creates(storage: Any, key: str, n: int) -> list[int]:
    """``n`` threads call ``storage.put_if_absent(key, b"writer <i>")`` at once; the ones that won.

    Errors other than the expected ``FileExistsError`` are raised after every thread is done.
    """
    barrier = threading.Barrier(n)
    winners: list[int] = []
    errors: list[BaseException] = []

    def race(i: int) -> None:
        barrier.wait()
        try:
            storage.put_if_absent(key, f"writer {i}".encode())
            winners.append(i)
        except FileExistsError:
            pass
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return winners


def write_file(path: Any, table: pa.Table, version: str, writer: str, batch_rows: int | None = None) -> None:
    """Write ``table`` as one Lance file with our writer (``writer="ours"``, in batches of
    ``batch_rows`` rows when given) or pylance's (``"pylance"``)."""
    if writer == "ours":
        from lance_table.file.writer import LanceFileWriter

        with LanceFileWriter(path, table.schema, version=version) as w:
            for batch in table.to_batches(max_chunksize=batch_rows) if batch_rows else [table]:
                w.write(batch)
    else:
        from lance.file import LanceFileWriter as TheirWriter

        with TheirWriter(str(path), table.schema, version=version) as w:
            w.write_batch(table)


def shuffled_rows(total: int, n: int, seed: int) -> np.ndarray:
    """``n`` shuffled row numbers below ``total``, a tenth of them repeated."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(total, n, replace=False)
    return rng.permutation(np.concatenate([picks, picks[: n // 10]]))


def file_bytes(table: pa.Table, version: str = "2.2", fields: Any = None) -> bytes:
    """``table`` as the bytes of one Lance file of ``version`` from our writer (``fields``: the
    Lance fields to write it with, when not those of its Arrow schema)."""
    import io

    from lance_table.file.writer import LanceFileWriter

    sink = io.BytesIO()
    with LanceFileWriter(sink, table.schema, version=version, fields=fields) as writer:
        writer.write(table)
    return sink.getvalue()


def pylance_file_table(data: bytes, tmp_path: Path) -> pa.Table:
    """The Lance file ``data`` as pylance's file reader reads it (skipped without pylance)."""
    import pytest

    lance_file = pytest.importorskip("lance.file")
    path = tmp_path / "f.lance"
    path.write_bytes(data)
    return lance_file.LanceFileReader(str(path)).read_all().to_table()


def edit_latest_manifest(root: Path, edit: Callable[[Any], None]) -> Path:
    """Change the newest manifest's protobuf in place (keeping the framing of format/manifest.py)."""
    from lance_table._proto import table_pb2

    def body(data: bytes) -> bytes:
        pb = table_pb2.Manifest.FromString(data)
        edit(pb)
        return bytes(pb.SerializeToString())

    return edit_latest_manifest_body(root, body)


def edit_latest_manifest_body(root: Path, edit: Callable[[bytes], bytes]) -> Path:
    """Replace the newest manifest's serialized message by ``edit`` of it (keeping the framing)."""
    from lance_table.format.manifest_file import MANIFEST_FOOTER, MANIFEST_FOOTER_VERSION, MANIFEST_MAGIC
    from lance_table.storage import open_storage
    from lance_table.table import versions

    path = root / versions.latest_entry(open_storage(str(root))).path
    data = path.read_bytes()
    (pos,) = struct.unpack_from("<Q", data, len(data) - 16)
    (n,) = struct.unpack_from("<I", data, pos)
    body = edit(data[pos + 4 : pos + 4 + n])
    path.write_bytes(
        data[:pos]
        + struct.pack("<I", len(body))
        + body
        + MANIFEST_FOOTER.pack(pos, *MANIFEST_FOOTER_VERSION)
        + MANIFEST_MAGIC
    )
    return path


def varied_table(rows: int, seed: int, *, wide: bool = False) -> pa.Table:
    """A table of ``rows`` rows of many shapes: id, x (nullable float), cat (4 strings), text
    (nullable strings), vec (4 floats), point (struct), tags (list of strings); ``wide`` adds
    plain (62-bit integers) and makes cat a dictionary column."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    words = np.array(["red", "green", "blue", "amber"], dtype=object)
    lengths = rng.integers(0, 3, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    tags = pa.ListArray.from_arrays(pa.array(offsets), pa.array(words[rng.integers(0, 4, int(offsets[-1]))]))
    x = pa.array(rng.random(rows), mask=ids % 11 == 0)
    cat = pa.array(words[ids % 4], pa.string())
    columns: dict[str, Any] = {"id": pa.array(ids), "x": x}
    if wide:
        columns["plain"] = pa.array(rng.integers(-(1 << 62), 1 << 62, rows))
        cat = cat.dictionary_encode()
    columns["cat"] = cat
    columns["text"] = pa.array([f"text-{i * 7919 % 100003}" for i in ids.tolist()], mask=ids % 13 == 0)
    columns["vec"] = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 4, dtype=np.float32)), 4)
    columns["point"] = pa.StructArray.from_arrays(
        [pa.array(ids.astype(np.int32)), pa.array(words[ids % 3])], names=["a", "b"]
    )
    columns["tags"] = tags
    return pa.table(columns)


def small_rows(start: int, n: int) -> pa.Table:
    """``n`` rows of ids ``start ..`` and short strings (a small append's data)."""
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "s": [f"r{i}" for i in range(n)]})


def small_history(uri: str, writer: str, sizes: Sequence[int], **options: Any) -> None:
    """Appends of ``sizes`` rows (the first creates, with ``options``), then a delete of ids 3 and
    101, all written by ``writer`` ("lance_table" or pylance)."""
    import lance

    import lance_table as lt

    lib: Any = lt if writer == "lance_table" else lance
    for i, n in enumerate(sizes):
        lib.write_dataset(
            small_rows(i * 100, n), uri, mode="append" if i else "create", **(options if not i else {})
        )
    lib.dataset(uri).delete("id = 3 OR id = 101")


def latest_manifest(uri: str) -> tuple[bytes, str]:
    """The bytes and path of a dataset's latest manifest."""
    from lance_table.storage import open_storage
    from lance_table.table import versions

    storage = open_storage(uri)
    entry = versions.list_versions(storage)[-1]
    return storage.read(entry.path), entry.path


def escape_a_data_path(uri: str) -> str:
    """Damage a dataset's latest manifest in place: its second fragment's first data file is
    renamed to a path that leaves the dataset (``../``), as long as the old one so that the
    protobuf framing still holds. Returns the manifest's path."""
    from pathlib import Path

    from lance_table.format.manifest_file import _parse

    data, path = latest_manifest(uri)
    pb, _, _ = _parse(data, path)
    old = pb.fragments[1].files[0].path
    bad = "../" + old[3:]
    at = data.rindex(old.encode())  # (the manifest's: the inline transaction names it before)
    assert len(bad) == len(old) and at > len(data) - len(pb.SerializeToString()) - 30
    Path(uri, path).write_bytes(data[:at] + bad.encode() + data[at + len(old) :])
    return path


def garble_string_chunks(root: str, data_file: str, column: str) -> None:
    """Garble every byte past the chunk headers of ``column``'s page (strings in a general
    compression) in one data file of the dataset at ``root``: no compressed frame survives."""
    from pathlib import Path

    from lance_table.file.reader import LanceFileReader
    from lance_table.file.v2_1 import small_layouts

    path = str(Path(root, "data", data_file))
    lay = small_layouts.layout(LanceFileReader(path), [column])
    assert lay is not None
    col = lay.columns[0]
    assert isinstance(col, small_layouts.ColumnLayout)
    raw = bytearray(Path(path).read_bytes())
    lo, hi = lay.start + col.data_at, lay.start + col.data_at + col.data_size
    for at in range(lo + 16, hi, 4):
        raw[at] ^= 0x5A
    Path(path).write_bytes(bytes(raw))


def mixed_writer_datasets(tmp_path: Any, writer: str, version: str, table: Any, rows: int) -> tuple[Any, Any]:
    """Six files of ``rows`` rows and an append of 300 rows by ``writer`` (``both``: the first
    three files by pylance, the rest by lance_table), the data ``table(start, count, seed)``; each
    library opens its own copy (lance_table's, then pylance's)."""
    import shutil
    from pathlib import Path

    import lance

    import lance_table as lt

    pristine = str(Path(tmp_path, "pristine"))
    writers = {"pylance": lance.write_dataset, "lance_table": lt.write_dataset}
    first = writers["pylance" if writer == "both" else writer]
    second = writers["lance_table" if writer == "both" else writer]
    first(table(0, 3 * rows, 1), pristine, data_storage_version=version, max_rows_per_file=rows)
    second(table(3 * rows, 3 * rows, 2), pristine, mode="append", max_rows_per_file=rows)
    second(table(6 * rows, 300, 3), pristine, mode="append")
    for side in ("ours", "theirs"):
        shutil.copytree(pristine, Path(tmp_path, side))
    return lt.dataset(str(Path(tmp_path, "ours"))), lance.dataset(str(Path(tmp_path, "theirs")))


def ids_and_vectors(start: int, n: int, seed: int) -> pa.Table:
    """id, x (10% null), a short string, and 16-float vectors whose first item is the row's id (a
    vector put beside the wrong id shows)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    vec = rng.random((n, 16), dtype=np.float32)
    vec[:, 0] = ids
    return pa.table(
        {
            "id": ids,
            "x": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
            "cat": pa.array([f"c{i % 37}" for i in ids.tolist()], pa.string()),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), 16),
        }
    )


def column_groups_spy(monkeypatch: Any, module: Any, name: str) -> list[list[list[str]]]:
    """The column groups (names only) that every call of ``module.name`` returns, as it returns
    them (calls returning None are left out)."""
    seen: list[list[list[str]]] = []
    real = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        if found is not None:
            seen.append([names for names, _ in found])
        return found

    monkeypatch.setattr(module, name, spy)
    return seen
