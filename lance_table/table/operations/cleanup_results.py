"""What a cleanup removed or would remove, with pylance's class and field names (``CleanupStats``,
``CleanupCandidateFile``, ``CleanupReferencedBranch``, ``CleanupExplanation``); the cleanup itself is
:mod:`lance_table.table.operations.cleanup`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CleanupStats:
    """What a cleanup removed (or, in a dry run, would remove), with pylance's field names.

    Example:
        ```python
        stats = ds.cleanup_old_versions(older_than=datetime.timedelta(0))
        print(stats.old_versions, stats.bytes_removed, stats.data_files_removed)
        ```
    """

    bytes_removed: int = 0
    old_versions: int = 0
    data_files_removed: int = 0
    transaction_files_removed: int = 0
    index_files_removed: int = 0
    deletion_files_removed: int = 0
    failed_deletes: int = 0

    @property
    def files_removed(self) -> int:
        """Every file removed (data, transaction, deletion and index files)."""
        return (
            self.data_files_removed
            + self.transaction_files_removed
            + self.index_files_removed
            + self.deletion_files_removed
        )


@dataclass(frozen=True)
class CleanupCandidateFile:
    """A file a cleanup removes (pylance's ``CleanupCandidateFile``): its URI, its kind
    (``manifest``, ``data``, ``deletion``, ``transaction``, ``index``), whether no removed version referenced
    it (``unverified``), and its size.

    Example:
        ```python
        ds.delete("id < 10")
        plan = ds.explain_cleanup_old_versions(older_than=datetime.timedelta(0))
        print([(f.kind, f.path) for f in plan.candidate_files])
        ```
    """

    path: str
    kind: str
    unverified: bool
    size_bytes: int


@dataclass(frozen=True)
class CleanupReferencedBranch:
    """A branch that keeps a version a cleanup would otherwise remove (it was created from that
    version and reads its files), as pylance's ``CleanupReferencedBranch`` in
    ``CleanupExplanation.referenced_branches``; ``cleanup_candidate`` is always False here.

    Example:
        ```python
        ds.create_branch("keep")
        ds.delete("id < 10")
        plan = ds.explain_cleanup_old_versions(older_than=datetime.timedelta(0))
        print([(b.name, b.referenced_version) for b in plan.referenced_branches])  # keep, 1
        ```
    """

    name: str
    referenced_version: int
    cleanup_candidate: bool


@dataclass(frozen=True)
class CleanupExplanation:
    """What a cleanup would remove (pylance's ``explain_cleanup_old_versions`` result).

    Example:
        ```python
        ds.delete("id < 10")
        plan = ds.explain_cleanup_old_versions(older_than=datetime.timedelta(0))
        print(plan.stats.old_versions, len(plan.candidate_files))
        ```
    """

    read_version: int
    stats: CleanupStats
    candidate_files: list[CleanupCandidateFile]
    candidate_files_truncated: bool
    candidate_file_limit: int
    referenced_branches: list[CleanupReferencedBranch]
    warnings: list[str]
