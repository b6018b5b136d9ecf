"""Truncate (pylance's ``truncate_table``): every row deleted in one Delete of all fragments, with
the predicate ``true`` as pylance records it; the schema, config and indices stay."""

from __future__ import annotations

from lance_table.format.transaction import Delete
from lance_table.table import versions
from lance_table.table.commit import Pending, check_can_commit
from lance_table.table.snapshot import Snapshot


def truncate(ds: Snapshot, message: str | None = None) -> Snapshot:
    """Delete every row of ``ds``; the version committed.

    Raises:
        UnsupportedFormatError: the version needs writer features lance_table lacks.
        CommitConflictError: a concurrent commit makes this one impossible (an append since ``ds``
            is not: its rows stay, as after pylance's truncate).
    """
    versions.check_writable(ds.manifest, ds.uri)
    check_can_commit(ds.commit_options, ds.storage)
    ids = tuple(f.id for f in ds.manifest.fragments)
    return ds.commit(Pending(Delete((), ids, "true"), ds.version), message=message)
