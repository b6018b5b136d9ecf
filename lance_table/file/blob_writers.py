"""pylance's sidecar blob writers: blob v2 bytes written before the data file that refers to
them (``LanceFileSession.open_packed_blob_writer`` / ``open_dedicated_blob_writer``).

A data file ``<dir>/<stem>.lance`` keeps its sidecars in ``<dir>/<stem>/``, each named by its
``blob_id`` (:func:`~lance_table.file.v2_1.blob_v2.blob_file_name`). A packed sidecar holds its
blobs back to back; a dedicated one holds exactly one. The writers return
:class:`~lance_table.blob_descriptors.BlobDescriptor` values, which a
:class:`~lance_table.blob_descriptors.BlobDescriptorArrayBuilder` turns into the blob column of
the data file (written afterwards at ``<dir>/<stem>.lance``).
"""

from __future__ import annotations

import contextlib
import os
from typing import IO, Any

import pyarrow as pa

from lance_table.blob_descriptors import BlobDescriptor, BlobDescriptorArrayBuilder, DescriptorKind
from lance_table.file.v2_1.blob_v2 import blob_file_name
from lance_table.storage import Storage

__all__ = ["DedicatedBlobWriter", "PackedBlobWriter", "sidecar_path"]

_BINARY = (
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_binary_view,
    pa.types.is_fixed_size_binary,
)


def sidecar_path(data_file: str, blob_id: int) -> str:
    """The path of sidecar ``blob_id`` of the data file ``data_file`` (relative paths stay
    relative).

    Raises:
        ValueError: ``data_file`` does not end with ``.lance``, or ``blob_id`` is 0 (reserved).
        OverflowError: ``blob_id`` is not a 32-bit unsigned integer.

    Example:
        ```python
        from lance_table.file.blob_writers import sidecar_path

        assert sidecar_path("data/a.lance", 1) == "data/a/" + "1" + "0" * 31 + ".blob"
        ```
    """
    if not data_file.endswith(".lance"):
        raise ValueError(f"Data file path {data_file!r} must end with '.lance'")
    if not 0 <= blob_id < 1 << 32:
        raise OverflowError(f"blob id {blob_id} is not a 32-bit unsigned integer")
    if blob_id == 0:
        raise ValueError("Blob id 0 is reserved")
    return f"{data_file[: -len('.lance')]}/{blob_file_name(blob_id)}"


class _SidecarWriter:
    """One sidecar file being written (the stream is opened at once, as pylance creates it)."""

    _name = "blob writer"

    def __init__(self, storage: Storage, path: str, shown: str, blob_id: int) -> None:
        self._stream: IO[bytes] | None = storage.open_writer(path)
        self._path = shown
        self._blob_id = blob_id
        self._written = 0

    @property
    def blob_id(self) -> int:
        """The sidecar's id within its data file."""
        return self._blob_id

    @property
    def path(self) -> str:
        """The sidecar's path in its store (as pylance gives it: no leading ``/``)."""
        return self._path

    def _write(self, data: Any) -> None:
        if self._stream is None:
            raise ValueError(f"{self._name} is already finished")
        view = memoryview(data)
        self._stream.write(view)
        self._written += view.nbytes

    def _close(self) -> None:
        if self._stream is None:
            raise ValueError(f"{self._name} is already finished")
        stream, self._stream = self._stream, None
        stream.close()

    def __del__(self) -> None:  # dropped unfinished: close what was written
        with contextlib.suppress(Exception):
            if self._stream is not None:
                self._stream.close()


class PackedBlobWriter(_SidecarWriter):
    """Writes blobs back to back into one packed sidecar (pylance's ``PackedBlobWriter``).

    Open with ``LanceFileSession.open_packed_blob_writer(data_file_path, blob_id)``.

    Raises:
        ValueError: a call after :meth:`finish` / :meth:`finish_array`.

    Example:
        ```python
        session = lt.file.LanceFileSession(tmp)
        writer = session.open_packed_blob_writer("data/part.lance", 1)
        writer.write_blob(b"hello")
        writer.write_blobs(pa.array([b"ab", None]))
        assert [repr(d) for d in writer.finish()][1:] == ["Packed { blob_id: 1, offset: 5, size: 2 }", "Null"]
        ```
    """

    _name = "PackedBlobWriter"

    def __init__(self, storage: Storage, path: str, shown: str, blob_id: int) -> None:
        super().__init__(storage, path, shown, blob_id)
        self._descriptors: list[BlobDescriptor] = []
        self._field: pa.Field | None = None

    @property
    def field(self) -> pa.Field:
        """The field of the column :meth:`finish_array` made.

        Raises:
            ValueError: :meth:`finish_array` was not called.
        """
        if self._field is None:
            raise ValueError("PackedBlobWriter field is available after finish_array")
        return self._field

    def write_blob(self, data: bytes) -> None:
        """Append one blob."""
        start = self._written
        self._write(data)
        self._descriptors.append(
            BlobDescriptor(DescriptorKind.PACKED, self._blob_id, start, self._written - start)
        )

    def write_blobs(self, payloads: pa.Array | pa.ChunkedArray) -> None:
        """Append each value of a binary array (``binary``, ``large_binary``, ``binary_view``,
        ``fixed_size_binary``, or a chunked one); a null value writes nothing and is a null
        descriptor.

        Raises:
            ValueError: the array is not binary.
        """
        if not any(check(payloads.type) for check in _BINARY):
            raise ValueError(f"Packed blob payload array must have a Binary Arrow type, got {payloads.type}")
        chunks = payloads.chunks if isinstance(payloads, pa.ChunkedArray) else [payloads]
        for chunk in chunks:
            for value in chunk:
                if value.is_valid:
                    self.write_blob(value.as_buffer())
                else:
                    self._descriptors.append(BlobDescriptor(None))

    def finish(self) -> list[BlobDescriptor]:
        """Close the sidecar; the descriptors of its blobs in writing order."""
        self._close()
        return list(self._descriptors)

    def finish_array(self, field_name: str) -> pa.StructArray:
        """Close the sidecar; its blobs as a blob v2 descriptor column named ``field_name``
        (its field is then :attr:`field`)."""
        builder = BlobDescriptorArrayBuilder(field_name)
        builder.extend(self.finish())
        self._field = builder.field
        return builder.finish()


class DedicatedBlobWriter(_SidecarWriter):
    """Writes one blob, in pieces, into a sidecar of its own (pylance's ``DedicatedBlobWriter``).

    Open with ``LanceFileSession.open_dedicated_blob_writer(data_file_path, blob_id)``.

    Raises:
        ValueError: a call after :meth:`finish`.

    Example:
        ```python
        session = lt.file.LanceFileSession(tmp)
        writer = session.open_dedicated_blob_writer("data/part.lance", 2)
        writer.write(b"big ")
        writer.write(b"blob")
        assert repr(writer.finish()) == "Dedicated { blob_id: 2, size: 8 }"
        ```
    """

    _name = "DedicatedBlobWriter"

    def write(self, data: bytes) -> None:
        """Append ``data`` to the blob."""
        self._write(data)

    def finish(self) -> BlobDescriptor:
        """Close the sidecar; the blob's descriptor."""
        self._close()
        return BlobDescriptor(DescriptorKind.DEDICATED, self._blob_id, 0, self._written)


def store_path(base: str, relative: str) -> str:
    """``relative`` below ``base`` as an object store path (pylance's form: a local path made
    absolute, a URI without its scheme and bucket; no leading ``/``)."""
    if "://" in base:
        rest = base.split("://", 1)[1]
        prefix = rest.split("/", 1)[1] if "/" in rest else ""
    else:
        prefix = os.path.abspath(base)
    return f"{prefix.strip('/')}/{relative}".lstrip("/")
