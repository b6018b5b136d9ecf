"""Config and metadata: reading and changing them in place

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap

from lance_table.table import remap, versions
from lance_table.table.commit.row_ids import uses_stable_row_ids
from lance_table.table.handle import Handle
from lance_table.table.operations import config as config_ops
from lance_table.table.row_id_api import StorageOptionsAccessor

if TYPE_CHECKING:
    from lance_table.file.session import LanceFileSession


class _Metadata(Handle):
    """Config and metadata: reading and changing them in place."""

    def config(self) -> dict[str, str]:
        """The dataset's config (key-value settings)."""
        return dict(self.manifest.config)

    @property
    def metadata(self) -> dict[str, str]:
        """The table metadata (key-value pairs)."""
        return dict(self.manifest.table_metadata)

    @property
    def schema_metadata(self) -> dict[str, str]:
        """The schema metadata, as text."""
        return config_ops.string_map(self.manifest.schema_metadata)

    @property
    def has_stable_row_ids(self) -> bool:
        """Whether the dataset keeps stable row ids (a flag of the dataset, whatever its fragments)."""
        return uses_stable_row_ids(self.manifest)

    @property
    def max_field_id(self) -> int:
        """The largest field id the version uses: of its schema or listed by its data files (a
        dropped column's id stays taken), -1 for none; new fields are numbered after it."""
        from lance_table.table.operations.schema_add import next_field_id

        return next_field_id(self.manifest) - 1

    @property
    def initial_storage_options(self) -> dict[str, Any] | None:
        """The storage options the dataset was opened with (None when none were given)."""
        return dict(self._storage.storage_options) or None

    def fragment_ids(self) -> BitMap:
        """The ids of this version's fragments, as a roaring bitmap (iterable, sized, ``in``;
        pylance's ``Bitmap``), without a fragment object each."""
        return BitMap(f.id for f in self.manifest.fragments)

    def version_refs(self) -> list[dict[str, int]]:
        """Every attached version as ``{"version": n}``, oldest first, from the listing alone
        (no manifest is read; pylance's ``version_refs``).

        Raises:
            CorruptFileError: the directory mixes the V1 and V2 manifest naming schemes.
        """
        return [{"version": e.version} for e in versions.list_versions(self._storage)]

    @property
    def storage_options_accessor(self) -> StorageOptionsAccessor | None:
        """The storage options the dataset was opened with, as pylance's accessor (static:
        lance_table has no credential provider); None when none were given."""
        options = self.initial_storage_options
        return None if options is None else StorageOptionsAccessor(options)

    def new_file_session(self) -> LanceFileSession:
        """A :class:`~lance_table.file.LanceFileSession` at the dataset's URI with its storage
        options, to read and write Lance files in it (pylance's ``new_file_session``).

        Raises:
            UnsupportedOptionError: never for a dataset handle (the session's own checks).
        """
        from lance_table.file.session import LanceFileSession

        return LanceFileSession(self.uri, self.latest_storage_options())

    def remap_row_addrs(self, addrs: Any) -> Any:
        """Row addresses from before compactions mapped to where the rows are now, by the
        fragment reuse index (pylance's ``remap_row_addrs``): a uint64 array, null for a row a
        compaction dropped, unchanged for an address no recorded compaction moved; None when
        the dataset has no fragment reuse index.

        Raises:
            CorruptFileError: the fragment reuse index is damaged.
        """
        return remap.remap_row_addrs(self._snapshot, addrs)

    def latest_storage_options(self) -> dict[str, Any] | None:
        """The storage options in use (lance_table does not refresh them from a provider: as
        :attr:`initial_storage_options`)."""
        return self.initial_storage_options

    def update_config(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set config keys (a None value removes one; ``replace`` drops every other key) in one
        ``UpdateConfig`` commit; the handle moves to it. Returns the config after.

        Raises:
            TypeError: keys or values other than strings (values may be None).
            CommitConflictError: a concurrent change of the same keys.
        """
        done = config_ops.update_config(self._snapshot, values, replace)
        return self._committed(done, dict(done.manifest.config))

    def delete_config_keys(self, keys: list[str]) -> None:
        """Remove config keys (missing ones are ignored); the handle moves to the version committed.

        Raises:
            TypeError: ``keys`` is not a list of strings.
        """
        self._committed(config_ops.delete_config_keys(self._snapshot, keys))

    def update_metadata(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set table metadata keys (None removes one; ``replace`` drops the others). Returns the
        table metadata after.

        Raises:
            TypeError: keys or values other than strings (values may be None).
        """
        done = config_ops.update_table_metadata(self._snapshot, values, replace)
        return self._committed(done, dict(done.manifest.table_metadata))

    def update_schema_metadata(
        self, values: Mapping[str, str | None], *, replace: bool = False
    ) -> dict[str, str]:
        """Set schema metadata keys (None removes one; ``replace`` drops the others). Returns the
        schema metadata after.

        Raises:
            TypeError: keys or values other than strings (values may be None).
            CommitConflictError: a concurrent change of the schema metadata.
        """
        done = config_ops.update_schema_metadata(self._snapshot, values, replace)
        return self._committed(done, config_ops.string_map(done.manifest.schema_metadata))

    def update_field_metadata(
        self, field_updates: Mapping[str, Mapping[str, str | None]], *, replace: bool = False
    ) -> None:
        """Set metadata keys of fields named by path (``"a"``, ``"s.x"``; None removes a key;
        ``replace`` drops a field's other keys), in one commit.

        Raises:
            TypeError: paths, keys or values other than strings (values may be None).
            FieldNotFoundError: a path names no field (also an OSError, as pylance's).
            CommitConflictError: a concurrent change of the same fields' metadata.
        """
        self._committed(config_ops.update_field_metadata(self._snapshot, field_updates, replace))

    def replace_schema_metadata(self, new_metadata: Mapping[str, str]) -> None:
        """Deprecated (as in pylance): ``update_schema_metadata(new_metadata, replace=True)``.

        Raises:
            as :meth:`update_schema_metadata`.
        """
        warnings.warn(
            "replace_schema_metadata is deprecated; use update_schema_metadata(metadata, replace=True)",
            DeprecationWarning,
            stacklevel=2,
        )
        self.update_schema_metadata(new_metadata, replace=True)

    def replace_field_metadata(self, field_name: str, new_metadata: Mapping[str, str]) -> None:
        """Deprecated (as in pylance): ``update_field_metadata({field_name: new_metadata}, replace=True)``.

        Raises:
            as :meth:`update_field_metadata`.
        """
        warnings.warn(
            "replace_field_metadata is deprecated; use update_field_metadata({path: metadata}, replace=True)",
            DeprecationWarning,
            stacklevel=2,
        )
        self.update_field_metadata({field_name: new_metadata}, replace=True)
