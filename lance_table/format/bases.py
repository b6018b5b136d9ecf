"""The base paths a manifest registers: other locations (shallow clones, external blob stores)
that files and external blobs are resolved against by id."""

from __future__ import annotations

from dataclasses import dataclass

from lance_table._proto import table_pb2
from lance_table.format.manifest import Manifest


@dataclass(frozen=True)
class BasePath:
    """One registered base: ``path`` is an absolute URI or path; ``is_dataset_root`` says whether
    files sit under it as under a dataset root (``data/``, ...) or directly in it."""

    id: int
    path: str
    is_dataset_root: bool = False
    name: str | None = None


def base_paths(manifest: Manifest) -> dict[int, BasePath]:
    """The manifest's registered base paths by id (none for most datasets)."""
    if not manifest.passthrough:
        return {}
    pb = table_pb2.Manifest()
    pb.MergeFromString(manifest.passthrough)
    return {
        b.id: BasePath(b.id, b.path, b.is_dataset_root, b.name if b.HasField("name") else None)
        for b in pb.base_paths
    }
