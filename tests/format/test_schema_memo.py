"""A manifest's schema is converted once per distinct serialized schema (``manifest.schema_of``):
these tests show that the fields kept for some bytes are never served for other bytes -- versions
before and after a schema evolution, datasets of other schemas in one process, a damaged record
-- with pylance as the oracle of each version's schema and contents."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table._proto import file_pb2
from lance_table.errors import CorruptFileError
from lance_table.format import manifest as manifest_mod
from lance_table.table.session import clear_caches
from tests.helpers import edit_latest_manifest_body


def _fields(ds: lt.LanceDataset) -> tuple[object, ...]:
    return ds._snapshot.manifest.fields


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "s": [f"v{i}" for i in range(n)]})


@pytest.mark.interop
def test_versions_across_a_schema_evolution_keep_their_own_schemas(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(10), uri)  # v1
    lt.write_dataset(_table(10, 10), uri, mode="append")  # v2: the same schema
    ds = lt.dataset(uri)
    ds.add_columns({"twice": "id * 2"})  # v3: a new column
    ds = lt.dataset(uri)
    ds.alter_columns({"path": "s", "name": "label"})  # v4: a renamed one
    lt.write_dataset(lt.dataset(uri).to_table().slice(0, 3), uri, mode="append")  # v5
    for order in ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1], [3, 1, 5, 2, 4, 1, 3]):
        clear_caches()
        for v in order:
            ours, theirs = lt.dataset(uri, version=v), lance.dataset(uri, version=v)
            assert ours.schema == theirs.schema, v
            assert ours.to_table().equals(theirs.to_table()), v
    # versions of one schema share its fields; the others have their own
    fields = {v: _fields(lt.dataset(uri, version=v)) for v in range(1, 6)}
    assert fields[1] is fields[2]
    assert fields[4] is fields[5]
    assert fields[2] is not fields[3] and fields[3] is not fields[4]
    assert [f.name for f in fields[3]] == ["id", "s", "twice"]
    assert [f.name for f in fields[4]] == ["id", "label", "twice"]


@pytest.mark.interop
def test_datasets_of_other_schemas_in_one_process(tmp_path: Path) -> None:
    """Datasets whose schemas differ only in a type, a nullability, a field's metadata or the
    writer (pylance's records), opened in turn: each gets its own schema."""
    lance = pytest.importorskip("lance")
    tables = {
        "base": _table(5),
        "int32": pa.table({"id": pa.array(range(5), pa.int32()), "s": [f"v{i}" for i in range(5)]}),
        "not_null": pa.table(
            {"id": pa.array(range(5), pa.int64()), "s": [f"v{i}" for i in range(5)]},
            schema=pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())]),
        ),
        "metadata": _table(5).cast(
            pa.schema([pa.field("id", pa.int64(), metadata={"unit": "m"}), pa.field("s", pa.string())])
        ),
    }
    uris = {}
    for name, table in tables.items():
        uris[name] = str(tmp_path / name)
        lt.write_dataset(table, uris[name])
        uris[f"{name}-pylance"] = str(tmp_path / f"{name}-pylance")
        lance.write_dataset(table, uris[f"{name}-pylance"])
    for _ in range(2):
        for name, uri in uris.items():
            ours = lt.dataset(uri)
            assert ours.schema == lance.dataset(uri).schema, name
            assert ours.to_table().equals(tables[name.removesuffix("-pylance")]), name
    assert _fields(lt.dataset(uris["base"])) is not _fields(lt.dataset(uris["metadata"]))
    assert _fields(lt.dataset(uris["int32"])) is not _fields(lt.dataset(uris["base"]))


def test_the_same_bytes_give_the_same_fields_until_caches_are_cleared(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lt.write_dataset(_table(4), a)
    lt.write_dataset(_table(4), b)
    clear_caches()
    first = _fields(lt.dataset(a))
    assert _fields(lt.dataset(b)) is first  # another dataset of the very same schema
    clear_caches()
    again = _fields(lt.dataset(b))
    assert again is not first and again == first


def _append_to_body(root: Path, extra: bytes) -> Path:
    """The latest manifest with ``extra`` (raw protobuf) appended to its message."""
    return edit_latest_manifest_body(root, lambda body: body + extra)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (b"\x0a\x02\xff\xff", "does not parse"),  # a field record (field 1) that is no Field
        (b"\x0a\x05\x0a\x01s\x10\x00", "schema is invalid"),  # a second field of id 0
    ],
)
def test_a_damaged_schema_record_is_a_corrupt_file_naming_it(
    tmp_path: Path, record: bytes, message: str
) -> None:
    root = tmp_path / "ds"
    lt.write_dataset(_table(3), str(root))
    lt.write_dataset(_table(3, 3), str(root), mode="append")
    assert lt.dataset(str(root), version=1).count_rows() == 3  # its schema is kept now
    path = _append_to_body(root, record)
    clear_caches()
    lt.dataset(str(root), version=1)  # (kept again: the damaged version's schema differs by a record)
    with pytest.raises(CorruptFileError, match=message) as info:
        lt.dataset(str(root), version=2)
    assert path.name in str(info.value)


def test_a_huge_schema_is_not_kept() -> None:
    """The kept schemas are bounded in bytes too: one of more than 4 MB is converted each time."""

    def record(metadata: bytes) -> bytes:
        f = file_pb2.Field(name="x", id=0, parent_id=-1, logical_type="int64", nullable=True)
        f.metadata["note"] = metadata
        return f.SerializeToString()

    small, huge = [record(b"m")], [record(b"m" * (5 << 20))]
    assert manifest_mod.schema_of(small, "a") is manifest_mod.schema_of(small, "a")
    first = manifest_mod.schema_of(huge, "b")
    assert manifest_mod.schema_of(huge, "b") is not first
    assert first == manifest_mod.schema_of(huge, "b")
    assert first[0].metadata == {"note": b"m" * (5 << 20)}
