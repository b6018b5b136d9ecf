"""The base paths a manifest registers: other locations (pylance's multi-base datasets, shallow
clones, external blob stores) that data, deletion and blob files are resolved against by id.

A data or deletion file whose ``base_id`` names a registered base lives in that base: under its
``data/`` (or ``_deletions/``) directory when the base ``is_dataset_root``, directly in it otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from lance_table._proto import table_pb2
from lance_table.errors import BasePathError
from lance_table.format.manifest import Manifest


@dataclass(frozen=True)
class DatasetBasePath:
    """One base path of a dataset (pylance's ``lance.DatasetBasePath``): a location data files may
    be written to and read from, registered in the manifest under an ``id``.

    ``path`` is a URI or local path, stored as given; ``name`` an optional alias that
    ``target_bases=`` may use; ``is_dataset_root`` says whether files sit under ``data/`` there (as
    in a dataset's own directory) or directly in it. ``id`` 0 (or None) means "not assigned yet":
    the commit that registers the base gives it the next free id.

    Example:
        ```python
        base = lt.DatasetBasePath(f"{tmp}/hot", name="hot")
        ds = lt.write_dataset(table, f"{tmp}/multi", initial_bases=[base], target_bases=["hot"])
        print(ds.base_paths())  # {1: DatasetBasePath(path=..., name='hot', ...)}
        ```

    Raises:
        TypeError: ``path`` is not a string or path, ``name`` not a string, ``id`` not an int.
    """

    path: str
    name: str | None = None
    is_dataset_root: bool = False
    id: int = 0

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        is_dataset_root: bool = False,
        id: int | None = None,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"DatasetBasePath path must be a str or path, got {type(path).__name__}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"DatasetBasePath name must be a str, got {type(name).__name__}")
        if id is not None and (not isinstance(id, int) or isinstance(id, bool) or not 0 <= id < 2**32):
            raise TypeError(f"DatasetBasePath id must be an int in [0, 2**32), got {id!r}")
        object.__setattr__(self, "path", os.fspath(path))
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "is_dataset_root", bool(is_dataset_root))
        object.__setattr__(self, "id", int(id or 0))

    def __reduce__(self) -> tuple[Any, ...]:
        return (DatasetBasePath, (self.path, self.name, self.is_dataset_root, self.id))

    def with_id(self, base_id: int) -> DatasetBasePath:
        """This base under id ``base_id``."""
        return replace(self, id=base_id)

    def to_pb(self, out: Any) -> None:
        """Fill a ``lance.table.BasePath`` protobuf."""
        out.id = self.id
        if self.name is not None:
            out.name = self.name
        out.is_dataset_root = self.is_dataset_root
        out.path = self.path

    @classmethod
    def from_pb(cls, pb: Any) -> DatasetBasePath:
        """A base from a ``lance.table.BasePath`` protobuf."""
        return cls(pb.path, pb.name if pb.HasField("name") else None, pb.is_dataset_root, pb.id)


BasePath = DatasetBasePath  # the name the format layer uses


def base_paths(manifest: Manifest) -> dict[int, DatasetBasePath]:
    """The manifest's registered base paths by id (none for most datasets)."""
    if not manifest.passthrough:
        return {}
    pb = table_pb2.Manifest()
    pb.MergeFromString(manifest.passthrough)
    return {b.id: DatasetBasePath.from_pb(b) for b in pb.base_paths}


def with_base_paths(manifest: Manifest, bases: Iterable[DatasetBasePath]) -> Manifest:
    """``manifest`` registering exactly ``bases`` (ordered by id)."""
    pb = table_pb2.Manifest()
    if manifest.passthrough:
        pb.MergeFromString(manifest.passthrough)
    del pb.base_paths[:]
    for base in sorted(bases, key=lambda b: b.id):
        base.to_pb(pb.base_paths.add())
    return replace(manifest, passthrough=pb.SerializeToString())


def register(
    existing: Mapping[int, DatasetBasePath], new: Iterable[DatasetBasePath]
) -> dict[int, DatasetBasePath]:
    """``existing`` with ``new`` bases added, each given the next free id when it has none (as
    pylance numbers them: from one above the highest registered id).

    Raises:
        BasePathError: a new base has the name or path of a registered (or another new) one, or an
            id already taken.
    """
    out = dict(existing)
    fresh = list(new)
    taken = set(out) | {b.id for b in fresh if b.id}
    next_id = max(out, default=0) + 1
    for base in fresh:
        if base.id:
            if base.id in out:
                raise BasePathError(
                    f"base path id {base.id} ({base.path}) is already registered for {out[base.id].path}",
                    reference=str(base.id),
                )
        else:
            while next_id in taken:
                next_id += 1
            base = base.with_id(next_id)
            taken.add(next_id)
        clash = _clash(out.values(), base)
        if clash is not None:
            raise BasePathError(
                f"Conflict detected: base path {_describe(base)} already exists as {_describe(clash)}",
                reference=base.name if base.name is not None and base.name == clash.name else base.path,
            )
        out[base.id] = base
    return out


def _clash(registered: Iterable[DatasetBasePath], base: DatasetBasePath) -> DatasetBasePath | None:
    for other in registered:
        if other.path == base.path or (base.name is not None and other.name == base.name):
            return other
    return None


def _describe(base: DatasetBasePath) -> str:
    named = f" named {base.name!r}" if base.name is not None else ""
    return f"{base.path!r}{named}"
