"""Branches and deep clones

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

from lance_table.table import branches
from lance_table.table.branch_checkout import checkout_reference
from lance_table.table.handle import Handle
from lance_table.table.operations import deep_clone as deep_clone_ops

Reference = int | str | tuple[str | None, int | None]
_B = TypeVar("_B", bound="_Branching")


class _Branching(Handle):
    """Branches and deep clones."""

    @property
    def branches(self) -> branches.Branches:
        """The dataset's branches (pylance's ``ds.branches``): ``list()``, ``list_ordered()``,
        ``delete()``, ``replace_metadata()``."""
        return branches.Branches(self._storage)

    def create_branch(
        self: _B,
        branch: str,
        reference: Reference | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> _B:
        """Create branch ``branch`` from ``reference`` (None: this handle's version; a version
        number of this handle's branch, a tag, or ``(branch, version)``, None meaning main and its
        latest version) and return a handle on it, as pylance's ``create_branch``. Writes through
        that handle go to the branch only (see :mod:`lance_table.table.branches`).

        Raises:
            BranchError: the name is ``main`` or has characters pylance refuses, or the branch
                exists.
            VersionNotFoundError, TagError: the reference does not resolve.
        """
        created = branches.create_branch(self._snapshot, branch, reference, storage_options)
        handle: _B = self._carry(self._handle_class()(created))
        return handle

    def deep_clone(
        self: _B,
        target_path: str | os.PathLike[str],
        reference: Reference,
        storage_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> _B:
        """Copy version ``reference`` (a number, a tag or ``(branch, version)``) with all its
        files into a new dataset at ``target_path`` and return it, opened with ``kwargs``, as
        pylance's ``deep_clone`` (see :mod:`lance_table.table.operations.deep_clone`).

        Raises:
            DatasetAlreadyExistsError: a dataset exists at ``target_path``.
            VersionNotFoundError, TagError, BranchError: the reference does not resolve.
        """
        src = checkout_reference(self._snapshot, reference)
        options = self._storage.storage_options if storage_options is None else storage_options
        tag = reference if isinstance(reference, str) else None
        deep_clone_ops.deep_clone(src, target_path, tag, options)
        opened: _B = self._handle_class()(os.fspath(target_path), storage_options=options, **kwargs)
        return opened

    def _handle_class(self) -> Any:
        """The dataset class (this mixin's final class), which new handles are made of."""
        return type(self)
