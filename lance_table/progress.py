"""pylance's ``lance.progress``: hooks told of each data file a write begins and completes
(:class:`FragmentWriteProgress`, for ``write_dataset(progress=...)``,
``lance_table.fragment.write_fragments(progress=...)`` and ``LanceFragment.create(progress=...)``),
and lance_table's progress records (:class:`ProgressEvent`) for the ``progress=`` argument of
every long operation (see :mod:`lance_table.table.progress`).
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from lance_table.storage import open_storage
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.progress import Progress, ProgressEvent, ProgressWarning


class FragmentWriteProgress(ABC):
    """Hooks a write calls around each data file it writes (pylance's experimental
    ``FragmentWriteProgress``): :meth:`begin` before the file is written, :meth:`complete` once it
    is. Files are reported one after the other, on the writing thread or a worker thread; an
    exception from a hook fails the write (its files are removed).

    Example:
        ```python
        from lance_table.progress import FragmentWriteProgress

        class Count(FragmentWriteProgress):
            def __init__(self) -> None:
                self.done = 0

            def begin(self, fragment, **kwargs) -> None:
                pass

            def complete(self, fragment, **kwargs) -> None:
                self.done += 1

        count = Count()
        lt.write_dataset(table, f"{tmp}/counted", max_rows_per_file=5, progress=count)
        assert count.done == 2
        ```
    """

    @abstractmethod
    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """A data file is about to be written: ``fragment`` names it (its only file, no fields
        and no rows yet; id 0, or ``LanceFragment.create``'s ``fragment_id``)."""

    @abstractmethod
    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """The data file is written: ``fragment`` is its metadata (id as in :meth:`begin`)."""


class NoopFragmentWriteProgress(FragmentWriteProgress):
    """Hooks that do nothing (what a write without ``progress`` does).

    Example:
        ```python
        from lance_table.progress import NoopFragmentWriteProgress

        lt.write_dataset(table, f"{tmp}/quiet", progress=NoopFragmentWriteProgress())
        ```
    """

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Nothing."""

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Nothing."""


class FileSystemFragmentWriteProgress(FragmentWriteProgress):
    """Records the fragments being written under ``base_uri`` (pylance's class of that name), so
    that the files of a write that died can be found: on :meth:`begin`,
    ``fragment_<id>.in_progress`` (JSON: ``fragment_id`` and this tracker's ``metadata``) and
    ``fragment_<id>.json`` (the fragment's metadata); on :meth:`complete`, the ``.in_progress``
    file is removed.

    Raises:
        StorageOptionsError: a storage option is unknown, unsafe or has a bad value.

    Example:
        ```python
        from lance_table.progress import FileSystemFragmentWriteProgress

        progress = FileSystemFragmentWriteProgress(f"{tmp}/progress", {"worker": "3"})
        lt.LanceFragment.create(uri, table, fragment_id=3, progress=progress)
        with open(f"{tmp}/progress/fragment_3.json") as f:
            print(json.load(f)["files"])  # the fragment's data file
        ```
    """

    PROGRESS_EXT = ".in_progress"

    def __init__(
        self,
        base_uri: str | os.PathLike[str],
        metadata: Mapping[str, str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._storage = open_storage(base_uri, storage_options)
        self._metadata = dict(metadata or {})

    def _in_progress_path(self, fragment: FragmentMetadata) -> str:
        return f"fragment_{fragment.id}{self.PROGRESS_EXT}"

    def _fragment_file(self, fragment: FragmentMetadata) -> str:
        return f"fragment_{fragment.id}.json"

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Write the two files that say ``fragment`` is being written."""
        state = {"fragment_id": fragment.id, "metadata": self._metadata}
        self._storage.write(self._in_progress_path(fragment), json.dumps(state).encode())
        self._storage.write(self._fragment_file(fragment), json.dumps(fragment.to_json()).encode())

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Remove the ``.in_progress`` file of ``fragment``."""
        self._storage.delete(self._in_progress_path(fragment))


__all__ = [
    "FileSystemFragmentWriteProgress",
    "FragmentWriteProgress",
    "NoopFragmentWriteProgress",
    "Progress",
    "ProgressEvent",
    "ProgressWarning",
]
