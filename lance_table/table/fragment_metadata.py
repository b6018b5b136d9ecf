"""Fragment metadata in pylance's shape: what workers of a distributed write hand to the driver.

:class:`FragmentMetadata`, :class:`DataFile` and :class:`DeletionFile` have pylance 14's fields,
constructors and JSON (``to_json()`` gives the dictionary pylance gives, ``from_json()`` reads the
string pylance writes), so metadata crosses between the libraries and between processes (they
pickle). :meth:`FragmentMetadata.to_fragment` and :meth:`FragmentMetadata.from_fragment` convert to
and from the format's own :class:`lance_table.format.manifest.Fragment`.
"""

from __future__ import annotations

import json as _json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_table._proto import table_pb2
from lance_table.errors import UnsupportedFormatError
from lance_table.format import manifest as fmt
from lance_table.table.data_file_layout import data_file_from_file

# pylance's names of the deletion file kinds, and the format's.
_DELETION_KINDS = {"array": fmt.DELETION_ARROW, "bitmap": fmt.DELETION_BITMAP}
_DELETION_NAMES = {v: k for k, v in _DELETION_KINDS.items()}


class _CallablePath(str):
    """A data file's path, which may still be called as the method it once was (pylance keeps
    ``DataFile.path()`` working, with a DeprecationWarning)."""

    def __call__(self) -> str:
        warnings.warn(
            "DataFile.path() is deprecated, use DataFile.path instead", DeprecationWarning, stacklevel=2
        )
        return str(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (str(self),))


@dataclass
class DataFile:
    """One data file of a fragment (pylance's ``lance.fragment.DataFile``).

    Attributes:
        path: the file name, relative to the dataset's ``data/`` directory.
        fields: the ids of the fields the file stores.
        column_indices: the column of each field in the file (empty for legacy files).
        file_major_version, file_minor_version: the file format version as the manifest records it.
        file_size_bytes: the file's size, when known.
        base_id: the registered base path holding the file (None: the dataset's own).

    Example:
        ```python
        data_file = ds.get_fragments()[0].metadata.files[0]
        print(data_file.path, data_file.fields, data_file.file_major_version, data_file.file_minor_version)
        ```
    """

    path: str
    fields: list[int]
    column_indices: list[int] = field(default_factory=list)
    file_major_version: int = 0
    file_minor_version: int = 0
    file_size_bytes: int | None = None
    base_id: int | None = None

    def __post_init__(self) -> None:
        self.column_indices = list(self.column_indices or [])
        if type(self.path) is not _CallablePath:
            self.path = _CallablePath(self.path)

    def __setstate__(self, state: dict[str, Any]) -> None:  # (unpickled: the path callable again)
        self.__dict__.update(state)
        self.path = _CallablePath(self.path)

    def field_ids(self) -> list[int]:
        """Deprecated (as in pylance): use ``fields``."""
        warnings.warn(
            "DataFile.field_ids is deprecated, use DataFile.fields instead", DeprecationWarning, stacklevel=2
        )
        return self.fields

    @classmethod
    def create(cls, dataset: Any, path: str, *, base_id: int | None = None) -> DataFile:
        """The record of the existing Lance file ``data/<path>`` of ``dataset`` (pylance's
        ``DataFile.create``): its columns matched to the dataset's top-level fields by name, with
        the field ids and column indices a ``DataReplacement`` commit needs.

        Raises:
            LanceFileNotFoundError: there is no such file (a FileNotFoundError and ValueError).
            SchemaError: a column the dataset lacks, or of another type (a ValueError).
            UnsupportedFormatError: not a Lance 2.x file; ``base_id`` is given.

        Example:
            ```python
            from lance_table.file import LanceFileWriter
            from lance_table.fragment import DataFile

            scores = ds.to_table(columns=["score"])
            with LanceFileWriter(f"{uri}/data/new_scores.lance", scores.schema) as writer:
                writer.write_batch(scores)
            print(DataFile.create(ds, "new_scores.lance").fields)
            ```
        """
        snapshot = dataset._snapshot
        return cls._from_format(
            data_file_from_file(snapshot.storage, snapshot.manifest.fields, path, base_id)
        )

    @classmethod
    def _from_format(cls, f: fmt.DataFile) -> DataFile:
        return cls(
            f.path,
            list(f.fields),
            list(f.column_indices),
            f.file_major_version,
            f.file_minor_version,
            f.file_size_bytes,
            f.base_id,
        )

    def __repr__(self) -> str:  # as pylance shows a data file
        return (
            f"DataFile(path={self.path!r}, fields={self.fields}, column_indices={self.column_indices}, "
            f"file_major_version={self.file_major_version}, file_minor_version={self.file_minor_version}, "
            f"file_size_bytes={self.file_size_bytes})"
        )

    def to_json(self) -> dict[str, Any]:
        """The dictionary pylance's ``FragmentMetadata.to_json`` holds for a data file (same keys,
        same order)."""
        return {
            "fields": list(self.fields),
            "column_indices": list(self.column_indices),
            "file_major_version": self.file_major_version,
            "file_minor_version": self.file_minor_version,
            "file_size_bytes": self.file_size_bytes,
            "base_id": self.base_id,
            "path": self.path,
        }


@dataclass(frozen=True)
class DeletionFile:
    """A fragment's deletion file (pylance's ``lance.fragment.DeletionFile``).

    Attributes:
        read_version: the version the deleting writer read.
        id: the file's random id.
        file_type: ``"array"`` (an Arrow IPC file) or ``"bitmap"`` (a roaring bitmap).
        num_deleted_rows: how many rows of the fragment are deleted.
        base_id: the registered base path holding the file (None: the dataset's own).

    Raises:
        ValueError: ``file_type`` is not ``"array"`` or ``"bitmap"`` (as pylance).

    Example:
        ```python
        ds.delete("id < 3")
        deletion = ds.get_fragments()[0].metadata.deletion_file
        print(deletion.file_type, deletion.num_deleted_rows, deletion.path(0))
        ```
    """

    read_version: int
    id: int
    file_type: str
    num_deleted_rows: int
    base_id: int | None = None

    def __post_init__(self) -> None:
        if self.file_type not in _DELETION_KINDS:
            raise ValueError(f"file_type must be either 'array' or 'bitmap', got {self.file_type!r}")

    def asdict(self) -> dict[str, Any]:
        """The dictionary pylance's ``DeletionFile.asdict`` returns."""
        return {
            "read_version": self.read_version,
            "id": self.id,
            "file_type": self.file_type,
            "num_deleted_rows": self.num_deleted_rows,
            "base_id": self.base_id,
        }

    def json(self) -> str:
        """The JSON text of :meth:`asdict`."""
        return _json.dumps(self.asdict())

    @staticmethod
    def from_json(json: str) -> DeletionFile:
        """Read what :meth:`json` wrote."""
        return DeletionFile(**_json.loads(json))

    def path(self, fragment_id: int, base_uri: str | None = None) -> str:
        """Where the file lives for fragment ``fragment_id``: relative to the dataset root, or
        joined to ``base_uri`` as pylance joins it (a path, its slashes at either end dropped).

        Raises:
            ValueError: ``base_uri`` has an empty path segment (as pylance refuses it).
        """
        relative = self._to_format().path(fragment_id)
        if base_uri is None:
            return relative
        parts = base_uri.strip("/").split("/")
        if "" in parts:
            raise ValueError(f"Invalid base URI: {base_uri}: it has an empty path segment")
        return "/".join([*parts, relative])

    def _to_format(self) -> fmt.DeletionFile:
        kind = _DELETION_KINDS[self.file_type]
        return fmt.DeletionFile(kind, self.read_version, self.id, self.num_deleted_rows, self.base_id)

    @staticmethod
    def _from_format(d: fmt.DeletionFile) -> DeletionFile:
        return DeletionFile(d.read_version, d.id, _DELETION_NAMES[d.kind], d.num_deleted_rows, d.base_id)


@dataclass(frozen=True)
class RowIdMeta:
    """The stable row ids of a fragment's rows: a serialized ``RowIdSequence`` stored inline (as
    pylance's ``RowIdMeta``; sequences in external files are not supported).

    Example:
        ```python
        stable = lt.write_dataset(table, f"{tmp}/stable", enable_stable_row_ids=True)
        print(stable.get_fragments()[0].metadata.row_id_meta)
        ```
    """

    inline: bytes

    def asdict(self) -> dict[str, Any]:
        """The dictionary pylance's ``RowIdMeta.asdict`` returns."""
        return {"Inline": list(self.inline)}

    @staticmethod
    def from_dict(dict: Mapping[str, Any]) -> RowIdMeta:
        """Raises: UnsupportedFormatError: the ids are stored in an external file."""
        return RowIdMeta(_inline_bytes(dict, "Inline", "row ids"))

    def json(self) -> str:
        """The JSON text pylance writes for the row ids (of :meth:`asdict`)."""
        return _json.dumps(self.asdict(), separators=(",", ":"))

    @staticmethod
    def from_json(json: str) -> RowIdMeta:
        """Read what :meth:`json` wrote.

        Raises:
            UnsupportedFormatError: the ids are stored in an external file.
        """
        return RowIdMeta.from_dict(_json.loads(json))


@dataclass(frozen=True)
class RowDatasetVersionMeta:
    """The version each row was created or last updated in: a serialized
    ``RowDatasetVersionSequence`` stored inline (as pylance's ``RowDatasetVersionMeta``).

    Example:
        ```python
        meta = ds.get_fragments()[0].metadata
        print(meta.created_at_version_meta, meta.last_updated_at_version_meta)  # None unless recorded
        ```
    """

    inline: bytes

    def asdict(self) -> dict[str, Any]:
        """The dictionary of :meth:`json`."""
        return {"inline": list(self.inline)}

    def json(self) -> str:
        """The JSON text pylance writes for the row versions."""
        return _json.dumps(self.asdict())

    @staticmethod
    def from_json(json: str) -> RowDatasetVersionMeta:
        """Raises: UnsupportedFormatError: the versions are stored in an external file."""
        return RowDatasetVersionMeta(_inline_bytes(_json.loads(json), "inline", "row versions"))


def _inline_bytes(data: Mapping[str, Any], key: str, what: str) -> bytes:
    if set(data) != {key}:
        raise UnsupportedFormatError(
            f"{what} stored as {sorted(data)}: lance_table handles only inline {what}"
        )
    return bytes(data[key])


# DataFragment fields of the row-id metadata: (pylance attribute, inline field, external field)
_ROW_META = (
    ("row_id_meta", "inline_row_ids", "external_row_ids"),
    ("created_at_version_meta", "inline_created_at_versions", "external_created_at_versions"),
    ("last_updated_at_version_meta", "inline_last_updated_at_versions", "external_last_updated_at_versions"),
)


@dataclass
class FragmentMetadata:
    """A fragment as pylance's ``lance.fragment.FragmentMetadata`` describes it.

    Fragments written by :func:`lance_table.fragment.write_fragments` have id 0 until a commit
    gives them ids. Overlays (pylance's data overlay files) are not supported: the list is always
    empty, and metadata holding overlays is refused.

    Example:
        ```python
        from lance_table.fragment import FragmentMetadata

        meta = ds.get_fragments()[0].metadata
        text = json.dumps(meta.to_json())  # what a worker sends to the driver
        assert FragmentMetadata.from_json(text) == meta
        ```
    """

    id: int
    files: list[DataFile]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_id_meta: RowIdMeta | None = None
    created_at_version_meta: RowDatasetVersionMeta | None = None
    last_updated_at_version_meta: RowDatasetVersionMeta | None = None
    overlays: list[Any] = field(default_factory=list)

    @property
    def num_deletions(self) -> int:
        """The number of deleted rows."""
        return 0 if self.deletion_file is None else self.deletion_file.num_deleted_rows

    @property
    def num_rows(self) -> int:
        """The number of rows after deletions."""
        return self.physical_rows - self.num_deletions

    def data_files(self) -> list[DataFile]:
        """Deprecated (as in pylance): use ``files``."""
        warnings.warn(
            "FragmentMetadata.data_files is deprecated. Use .files instead.", DeprecationWarning, stacklevel=2
        )
        return self.files

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dictionary, the one pylance's ``to_json`` returns for the same fragment."""
        return {
            "id": self.id,
            "files": [f.to_json() for f in self.files],
            "overlays": [],
            "physical_rows": self.physical_rows,
            "deletion_file": None if self.deletion_file is None else self.deletion_file.asdict(),
            "row_id_meta": None if self.row_id_meta is None else self.row_id_meta.asdict(),
            "created_at_version_meta": _version_meta_json(self.created_at_version_meta),
            "last_updated_at_version_meta": _version_meta_json(self.last_updated_at_version_meta),
        }

    @staticmethod
    def from_json(json_data: str | Mapping[str, Any]) -> FragmentMetadata:
        """Read what ``json.dumps(meta.to_json())`` wrote, in either library (a dictionary is taken too).

        Raises:
            UnsupportedFormatError: the fragment has overlays, or row metadata in external files.
            KeyError, TypeError, ValueError: the JSON is not fragment metadata.
        """
        data = _json.loads(json_data) if isinstance(json_data, (str, bytes)) else json_data
        if data.get("overlays"):
            raise UnsupportedFormatError("fragment metadata with data overlay files is not supported")
        deletion = data.get("deletion_file")
        created = data.get("created_at_version_meta")
        updated = data.get("last_updated_at_version_meta")
        return FragmentMetadata(
            id=data["id"],
            files=[DataFile(**f) for f in data["files"]],
            physical_rows=data["physical_rows"],
            deletion_file=None if deletion is None else DeletionFile(**deletion),
            row_id_meta=None if data.get("row_id_meta") is None else RowIdMeta.from_dict(data["row_id_meta"]),
            created_at_version_meta=(
                None if created is None else RowDatasetVersionMeta.from_json(_json.dumps(created))
            ),
            last_updated_at_version_meta=(
                None if updated is None else RowDatasetVersionMeta.from_json(_json.dumps(updated))
            ),
        )

    def to_fragment(self) -> fmt.Fragment:
        """The format's fragment.

        Raises:
            UnsupportedFormatError: the fragment has data overlay files.
        """
        if self.overlays:
            raise UnsupportedFormatError("fragment metadata with data overlay files is not supported")
        files = tuple(
            fmt.DataFile(
                path=str(f.path),
                fields=tuple(int(i) for i in f.fields),
                column_indices=tuple(int(i) for i in f.column_indices),
                file_major_version=int(f.file_major_version),
                file_minor_version=int(f.file_minor_version),
                file_size_bytes=f.file_size_bytes,
                base_id=f.base_id,
            )
            for f in self.files
        )
        meta = table_pb2.DataFragment()
        for attr, inline, _ in _ROW_META:
            value = getattr(self, attr)
            if value is not None:
                setattr(meta, inline, value.inline)
        return fmt.Fragment(
            id=int(self.id),
            files=files,
            physical_rows=int(self.physical_rows),
            deletion_file=None if self.deletion_file is None else self.deletion_file._to_format(),
            row_id_meta=meta.SerializeToString(),
        )

    @staticmethod
    def from_fragment(fragment: fmt.Fragment) -> FragmentMetadata:
        """The pylance-shaped metadata of a format fragment.

        Raises:
            UnsupportedFormatError: its row ids or row versions are stored in external files.
        """
        metas: dict[str, Any] = {}
        if fragment.row_id_meta:
            pb = table_pb2.DataFragment.FromString(fragment.row_id_meta)
            for attr, inline, external in _ROW_META:
                if pb.HasField(external):
                    raise UnsupportedFormatError(
                        f"fragment {fragment.id} keeps {attr} in an external file, which lance_table "
                        "does not handle"
                    )
                if pb.HasField(inline):
                    value = getattr(pb, inline)
                    metas[attr] = RowIdMeta(value) if attr == "row_id_meta" else RowDatasetVersionMeta(value)
        deletion = fragment.deletion_file
        return FragmentMetadata(
            id=fragment.id,
            files=[DataFile._from_format(f) for f in fragment.files],
            physical_rows=fragment.physical_rows,
            deletion_file=None if deletion is None else DeletionFile._from_format(deletion),
            **metas,
        )


def _version_meta_json(meta: RowDatasetVersionMeta | None) -> dict[str, Any] | None:
    return None if meta is None else _json.loads(meta.json())
