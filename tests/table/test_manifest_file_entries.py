"""What a manifest says about a data file (its size, its path) is checked against the store:
a size the file does not have, or a path no file system can hold, is a CorruptFileError naming
the file, on every backend."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table._proto import table_pb2
from lance_table.errors import CorruptFileError
from lance_table.format.manifest_file import MANIFEST_FOOTER, MANIFEST_FOOTER_VERSION, MANIFEST_MAGIC
from lance_table.storage import Storage, open_storage
from lance_table.table import versions


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[str, dict[str, str] | None]]:
    """A fresh dataset URI on each backend, with its storage options."""
    if request.param == "local":
        yield str(tmp_path / "ds"), None
    elif request.param == "memory":
        uri = f"memory://sizes-{uuid.uuid4().hex}"
        yield uri, None
        fsspec.filesystem("memory").rm(uri.replace("memory://", "/"), recursive=True)
    else:
        yield request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options")


def _edit_manifest(storage: Storage, edit: Callable[[Any], None]) -> None:
    """Change the newest manifest's protobuf in place (keeping the framing of format/manifest.py)."""
    entry = versions.latest_entry(storage)
    data = storage.read(entry.path)
    (pos,) = struct.unpack_from("<Q", data, len(data) - 16)
    (n,) = struct.unpack_from("<I", data, pos)
    pb = table_pb2.Manifest.FromString(data[pos + 4 : pos + 4 + n])
    edit(pb)
    body = pb.SerializeToString()
    footer = MANIFEST_FOOTER.pack(pos, *MANIFEST_FOOTER_VERSION) + MANIFEST_MAGIC
    storage.write(entry.path, data[:pos] + struct.pack("<I", len(body)) + body + footer)


@pytest.mark.parametrize("delta", [1000, 10_000_000, -1000], ids=["past-end", "far-past-end", "short"])
def test_file_size_bytes_that_disagree_with_the_file(where: tuple[str, Any], delta: int) -> None:
    uri, options = where
    table = pa.table({"id": np.random.default_rng(0).integers(0, 2**62, 200_000)})
    ds = lt.write_dataset(table, uri, storage_options=options)
    (data_file,) = ds.manifest.fragments[0].files
    actual = data_file.file_size_bytes
    assert actual is not None and actual > 1_000_000
    claimed = actual + delta

    def set_size(pb: Any) -> None:
        pb.fragments[0].files[0].file_size_bytes = claimed

    _edit_manifest(open_storage(uri, options), set_size)
    with pytest.raises(CorruptFileError, match="disagree about its size") as info:
        lt.dataset(uri, storage_options=options).to_table()
    assert info.value.path.endswith(f"data/{data_file.path}")
    assert f"{claimed} bytes" in str(info.value) and f"the file {actual}" in str(info.value)


@pytest.mark.parametrize(
    "bad, problem",
    [
        ("x" * 4994 + ".lance", "5000 bytes long"),
        ("sub/" + "x" * 294 + ".lance", "name of 300 bytes"),
        ("é" * 200 + ".lance", "name of 406 bytes"),  # 206 characters, but bytes are what file systems count
    ],
    ids=["5000-chars", "long-name", "long-utf8-name"],
)
def test_over_long_data_file_path_is_refused(tmp_path: Any, bad: str, problem: str) -> None:
    """Before: the OS's ENAMETOOLONG as a bare OSError, with the whole path in it."""
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"id": np.arange(10)}), uri)
    storage = open_storage(uri)
    manifest = f"{uri}/{versions.latest_entry(storage).path}"

    def set_path(pb: Any) -> None:
        pb.fragments[0].files[0].path = bad

    _edit_manifest(storage, set_path)
    with pytest.raises(CorruptFileError, match=problem) as info:
        lt.dataset(uri).to_table()
    assert info.value.path == manifest
    message = str(info.value)
    assert bad[:40] in message and bad not in message and len(message) < len(manifest) + 300
