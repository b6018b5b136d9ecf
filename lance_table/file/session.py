"""pylance's ``LanceFileSession``: readers and writers of Lance files under one base path, opened
with one set of storage options."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa

from lance_table.errors import UnsupportedOptionError
from lance_table.file.api import LanceFileReader, LanceFileWriter
from lance_table.file.blob_writers import DedicatedBlobWriter, PackedBlobWriter, sidecar_path, store_path
from lance_table.storage import Storage, open_storage


@dataclass
class ListResult:
    """One level of a listing (pylance's ``ListResult``): the child directories
    (``common_prefixes``) and files (``objects``) of a path, relative to the session's base path.

    Example:
        ```python
        from lance_table.file.session import ListResult

        assert ListResult(["a"], ["x.txt"]).objects == ["x.txt"]
        ```
    """

    common_prefixes: list[str] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)


# Bytes copied at a time by upload_file and download_file.
_COPY_CHUNK = 8 * 1024 * 1024


class LanceFileSession:
    """Opens Lance file readers and writers by paths relative to ``base_path`` (a directory or a
    URI), all with ``storage_options``.

    Raises:
        UnsupportedOptionError: ``namespace_client`` or ``table_id`` is set.

    Example:
        ```python
        session = lt.file.LanceFileSession(tmp)  # a directory or a URI (s3://bucket/files, ...)
        with session.open_writer("part-0.lance") as writer:
            writer.write_batch(pa.table({"x": [1, 2]}))
        assert session.open_reader("part-0.lance").read_all().to_table().num_rows == 2
        ```
    """

    def __init__(
        self,
        base_path: str | os.PathLike[str],
        storage_options: Mapping[str, Any] | None = None,
        namespace_client: Any = None,
        table_id: Sequence[str] | None = None,
    ) -> None:
        for name, value in (("namespace_client", namespace_client), ("table_id", table_id)):
            if value is not None:
                raise UnsupportedOptionError("LanceFileSession", name)
        self._base = os.fspath(base_path).rstrip("/")
        self._storage_options = dict(storage_options or {})

    def _path(self, path: str) -> str:
        return f"{self._base}/{path.lstrip('/')}"

    @cached_property
    def _storage(self) -> Storage:
        return open_storage(self._base, self._storage_options)

    def open_reader(self, path: str, columns: Sequence[str] | None = None) -> LanceFileReader:
        """A reader of the file ``path`` (relative to the base path), of ``columns`` (all when None).

        Raises:
            LanceFileNotFoundError: there is no such file (also a FileNotFoundError).
        """
        return LanceFileReader(self._path(path), self._storage_options, columns)

    def open_writer(
        self,
        path: str,
        *,
        schema: pa.Schema | None = None,
        data_cache_bytes: int | None = None,
        version: str | None = None,
        keep_original_array: bool | None = None,
        max_page_bytes: int | None = None,
    ) -> LanceFileWriter:
        """A writer of the file ``path`` (relative to the base path); the options are
        ``LanceFileWriter``'s (``keep_original_array`` tunes pylance's buffering and is accepted
        as a no-op).

        Raises:
            ValueError: ``data_cache_bytes`` or ``max_page_bytes`` is not positive.
            UnsupportedFormatError: ``version`` is unknown.
        """
        return LanceFileWriter(
            self._path(path),
            schema,
            data_cache_bytes=data_cache_bytes,
            version=version,
            storage_options=self._storage_options,
            max_page_bytes=max_page_bytes,
        )

    def open_packed_blob_writer(self, path: str, blob_id: int) -> PackedBlobWriter:
        """A writer of the packed sidecar ``blob_id`` of the data file ``path`` (relative to the
        base path; the sidecar goes to ``<path without .lance>/<name>.blob``).

        Raises:
            ValueError: ``path`` does not end with ``.lance``, or ``blob_id`` is 0.
            OverflowError: ``blob_id`` is not a 32-bit unsigned integer.
        """
        where = sidecar_path(path.lstrip("/"), blob_id)
        return PackedBlobWriter(self._storage, where, store_path(self._base, where), blob_id)

    def open_dedicated_blob_writer(self, path: str, blob_id: int) -> DedicatedBlobWriter:
        """A writer of the dedicated sidecar ``blob_id`` of the data file ``path`` (as
        :meth:`open_packed_blob_writer`).

        Raises:
            as :meth:`open_packed_blob_writer`.
        """
        where = sidecar_path(path.lstrip("/"), blob_id)
        return DedicatedBlobWriter(self._storage, where, store_path(self._base, where), blob_id)

    # -- files under the base path (pylance's object store helpers) ---------------------------------

    def contains(self, path: str) -> bool:
        """Whether the file ``path`` (relative to the base path) exists (a directory does not
        count)."""
        return self._storage.exists(path.strip("/"))

    def list(self, path: str | None = None) -> list[str]:
        """Every file below ``path`` (the base path when None), at any depth, relative to the
        base path."""
        return [e.path for e in self._storage.list_tree((path or "").strip("/"))]

    def list_with_delimiter(self, path: str | None = None) -> ListResult:
        """The files directly in ``path`` and its child directories (those holding files),
        relative to the base path."""
        where = (path or "").strip("/")
        prefix = f"{where}/" if where else ""
        dirs: set[str] = set()
        files: list[str] = []
        for entry in self._storage.list_tree(where):
            rest = entry.path[len(prefix) :]
            if "/" in rest:
                dirs.add(prefix + rest.split("/", 1)[0])
            else:
                files.append(entry.path)
        return ListResult(common_prefixes=sorted(dirs), objects=files)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of the file ``path``.

        Raises:
            OSError: the file does not exist (FileNotFoundError) or ends before the range does.
        """
        where = path.strip("/")
        size = self._storage.size(where)
        if offset < 0 or length < 0 or offset + length > size:
            raise OSError(f"{self._path(where)}: [{offset}, {offset + length}) is beyond its {size} bytes")
        return bytes(self._storage.read_ranges(where, [(offset, length)])[0]) if length else b""

    def delete_file(self, path: str) -> None:
        """Remove the file ``path``.

        Raises:
            FileNotFoundError: it does not exist (an OSError, as pylance raises).
        """
        where = path.strip("/")
        if not self._storage.exists(where):
            raise FileNotFoundError(f"{self._path(where)}: no such file to delete")
        self._storage.delete(where)

    def upload_file(self, local_path: str | os.PathLike[str], remote_path: str) -> None:
        """Copy the local file ``local_path`` to ``remote_path`` (relative to the base path).

        Raises:
            OSError: the local file cannot be read.
        """
        with open(local_path, "rb") as src:
            stream = self._storage.open_writer(remote_path.strip("/"))
            try:
                shutil.copyfileobj(src, stream, _COPY_CHUNK)
            finally:
                stream.close()

    def download_file(self, remote_path: str, local_path: str | os.PathLike[str]) -> None:
        """Copy the file ``remote_path`` to the local file ``local_path`` (whose directory must
        exist).

        Raises:
            OSError: the remote file does not exist (FileNotFoundError) or the local one cannot be
                written.
        """
        where = remote_path.strip("/")
        size = self._storage.size(where)
        with open(local_path, "wb") as out:
            for start in range(0, size, _COPY_CHUNK):
                n = min(_COPY_CHUNK, size - start)
                out.write(self._storage.read_ranges(where, [(start, n)])[0])


__all__ = ["LanceFileSession", "ListResult"]
