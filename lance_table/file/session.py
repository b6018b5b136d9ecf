"""pylance's ``LanceFileSession``: readers and writers of Lance files under one base path, opened
with one set of storage options."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_table.errors import UnsupportedOptionError
from lance_table.file.api import LanceFileReader, LanceFileWriter
from lance_table.file.blob_writers import DedicatedBlobWriter, PackedBlobWriter, sidecar_path, store_path
from lance_table.storage import open_storage


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
        storage = open_storage(self._base, self._storage_options)
        return PackedBlobWriter(storage, where, store_path(self._base, where), blob_id)

    def open_dedicated_blob_writer(self, path: str, blob_id: int) -> DedicatedBlobWriter:
        """A writer of the dedicated sidecar ``blob_id`` of the data file ``path`` (as
        :meth:`open_packed_blob_writer`).

        Raises:
            as :meth:`open_packed_blob_writer`.
        """
        where = sidecar_path(path.lstrip("/"), blob_id)
        storage = open_storage(self._base, self._storage_options)
        return DedicatedBlobWriter(storage, where, store_path(self._base, where), blob_id)


__all__ = ["LanceFileSession"]
