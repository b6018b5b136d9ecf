"""Indices: what pylance's ``describe_indices``/``list_indices``/``has_index`` show, read from the
manifest; the index-building methods raise (lance_table builds and reads no index files).

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

import warnings
from typing import Any

from lance_table.errors import UnsupportedOperationError
from lance_table.table import index_list
from lance_table.table.frag_reuse import load_versions
from lance_table.table.handle import Handle
from lance_table.table.index_list import IndexDescription


class _Indices(Handle):
    """Index metadata, read only."""

    def describe_indices(self) -> list[IndexDescription]:
        """The indices of this version as pylance describes them (name, type, fields, segments with
        the fragments each covers, rows indexed), read from the manifest alone."""
        return index_list.describe_indices(self.manifest, self._reuse_loader)

    def list_indices(self) -> list[dict[str, Any]]:
        """One dict per index segment, as pylance's deprecated ``list_indices`` gives them (and, like
        it, with a DeprecationWarning pointing at :meth:`describe_indices`)."""
        warnings.warn(
            "The 'list_indices' method is deprecated. Use describe_indices() instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return index_list.list_indices(self.manifest, self._reuse_loader)

    @property
    def has_index(self) -> bool:
        """Whether this version has any index."""
        return bool(index_list.describe_indices(self.manifest))

    def _reuse_loader(self, idx: Any) -> list[Any]:
        return load_versions(self._storage, idx)

    def create_index(
        self, column: str | list[str], index_type: str, name: str | None = None, **kwargs: Any
    ) -> None:
        """Not supported: lance_table does not build indices (build them with pylance).

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("create_index"))

    def create_scalar_index(
        self, column: str, index_type: str, name: str | None = None, **kwargs: Any
    ) -> None:
        """Not supported: lance_table does not build indices (build them with pylance).

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("create_scalar_index"))

    def drop_index(self, name: str) -> None:
        """Not supported yet: lance_table does not write index transactions.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("drop_index"))

    def index_statistics(self, index_name: str) -> dict[str, Any]:
        """Not supported: index statistics need the index files, which lance_table does not read.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("index_statistics"))
