"""Manifest naming: the scheme a new dataset uses (``enable_v2_manifest_paths``) and the migration of
a dataset's V1 manifest names (``{version}.manifest``) to V2 names (inverted, zero-padded), as
pylance's ``migrate_manifest_paths_v2`` does."""

from __future__ import annotations

from lance_table.format import paths
from lance_table.storage import Storage

# pylance's default for new datasets (write_dataset and commit).
DEFAULT_V2_MANIFEST_PATHS = True


def scheme_for_new_dataset(enable_v2_manifest_paths: bool | None) -> str:
    """The naming scheme of a new dataset's manifests (the option is ignored for existing ones)."""
    enabled = DEFAULT_V2_MANIFEST_PATHS if enable_v2_manifest_paths is None else enable_v2_manifest_paths
    return paths.ManifestNaming.V2 if enabled else paths.ManifestNaming.V1


def migrate_manifest_paths_v2(storage: Storage) -> int:
    """Give every manifest with a V1 name its V2 name; return how many were renamed.

    Idempotent, and resumable: an interrupted run leaves some manifests under both names or only
    the new one, and running it again finishes the job. Like pylance's, it must not run while
    other writers commit.
    """
    names = storage.list_names(paths.VERSIONS_DIR)
    renamed = 0
    for name in names:
        parsed = paths.parse_manifest_name(name)
        if parsed is None or parsed[1] != paths.ManifestNaming.V1:
            continue
        version = parsed[0]
        old = f"{paths.VERSIONS_DIR}/{name}"
        new = f"{paths.VERSIONS_DIR}/{paths.manifest_name(version, paths.ManifestNaming.V2)}"
        if not storage.exists(new):  # a run before this one may have copied it already
            storage.write(new, storage.read(old))
        storage.delete(old)
        renamed += 1
    return renamed
