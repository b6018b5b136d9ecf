"""Distributed compaction with pylance's objects (``lance.optimize.Compaction.plan``, ``CompactionTask``,
``RewriteResult``, ``Compaction.commit``): a driver plans, workers in any process rewrite one task's
fragments each, and the driver commits every rewrite as one compaction (lance-ray's contract).

Tasks and results pickle; a task reads the version the plan was made on, whatever was committed
since, and the commit rebases over concurrent appends as any compaction does.
"""

from __future__ import annotations

import json as _json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lance_table.errors import CommitConflictError, FragmentMetadataError
from lance_table.table import compaction_json as cj
from lance_table.table import indices
from lance_table.table.frag_reuse import load_versions
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.operations.compaction import (
    CompactionMetrics,
    _files_of,
    commit_compaction,
    job_for,
    plan_compaction,
    rewrite,
)
from lance_table.table.operations.compaction_bins import _Bin
from lance_table.table.snapshot import Snapshot

# the options that decide which fragments are compacted (the others only tune the rewrite)
PLAN_OPTIONS = ("target_rows_per_fragment", "materialize_deletions", "materialize_deletions_threshold")


def _at(dataset: Any, version: int) -> Snapshot:
    snapshot: Snapshot = dataset._snapshot
    return snapshot if snapshot.version == version else dataset.checkout_version(version)._snapshot


def _bins_of(snapshot: Snapshot, groups: Sequence[Sequence[int]]) -> list[_Bin]:
    """The bins of fragment ids ``groups`` of ``snapshot``, with the indices covering them."""
    readers = {r.fragment.id: r for r in snapshot.fragment_readers()}
    missing = [i for ids in groups for i in ids if i not in readers]
    if missing:
        raise CommitConflictError(
            f"{snapshot.uri}: fragments {missing} of a compaction task are not in version {snapshot.version}",
            retryable=False,
        )
    index_list = indices.decode_section(snapshot.manifest.index_section)
    covered = indices.coverage(index_list, lambda idx: load_versions(snapshot.storage, idx))
    return [
        _Bin([readers[i] for i in ids], [True] * len(ids), covered(ids[0]) if ids else ()) for ids in groups
    ]


@dataclass(frozen=True)
class RewriteResult:
    """What one :class:`CompactionTask` wrote (pylance's ``lance.optimize.RewriteResult``): hand it
    back to the driver for :meth:`~lance_table.optimize.Compaction.commit`.

    Attributes:
        read_version: the version the task read.
        metrics: the task's share of the compaction's metrics.
        old_fragments: the fragments it rewrote.
        new_fragments: the fragments written in their place (ids are assigned at the commit).

    Example:
        ```python
        from lance_table.optimize import Compaction

        ds.delete("id % 2 = 0")
        plan = Compaction.plan(ds, {"target_rows_per_fragment": 1_000_000})
        result = plan.tasks[0].execute(ds)
        print(result.metrics, [f.physical_rows for f in result.new_fragments])
        ```
    """

    read_version: int
    metrics: CompactionMetrics
    old_fragments: list[FragmentMetadata]
    new_fragments: list[FragmentMetadata]
    files: tuple[str, ...] = field(default=(), repr=False)  # every file written, sidecars too

    @property
    def original_fragments(self) -> list[FragmentMetadata]:
        """The fragments the task rewrote (pylance's name of :attr:`old_fragments`)."""
        return self.old_fragments

    def json(self) -> str:
        """The result as pylance's JSON (``RewriteResult.json()``), for a driver of either library.

        Example:
            ```python
            from lance_table.optimize import Compaction, RewriteResult

            ds.delete("id % 2 = 0")
            result = Compaction.plan(ds, {"target_rows_per_fragment": 1_000_000}).tasks[0].execute(ds)
            Compaction.commit(ds, [RewriteResult.from_json(result.json())])
            ```
        """
        return _json.dumps(
            {
                "metrics": cj.metrics_json(self.metrics),
                "new_fragments": [cj.fragment_json(f) for f in self.new_fragments],
                "read_version": self.read_version,
                "original_fragments": [cj.fragment_json(f) for f in self.old_fragments],
                "row_addrs": None,
            },
            separators=(",", ":"),
        )

    @staticmethod
    def from_json(json: str) -> RewriteResult:
        """A result from pylance's JSON (written by :meth:`json` or by pylance's). pylance's
        ``row_addrs`` (moved row addresses) are not read: the commit works them out again.

        Raises:
            FragmentMetadataError: the text is not such JSON (a ValueError, as pylance raises).
        """
        data = cj.load(
            json, "RewriteResult", ("metrics", "new_fragments", "read_version", "original_fragments")
        )
        new = cj.fragments_from_json(data["new_fragments"], "new_fragments")
        return RewriteResult(
            int(data["read_version"]),
            cj.metrics_from_json(data["metrics"]),
            cj.fragments_from_json(data["original_fragments"], "original_fragments"),
            new,
            # (what a failed commit deletes: the new data files in the dataset's own directory)
            tuple(f"data/{d.path}" for f in new for d in f.files if d.base_id is None),
        )

    def __repr__(self) -> str:  # pylance's: the fragments, new before old, without the metrics
        return (
            f"RewriteResult(read_version={self.read_version}, new_fragments={self.new_fragments!r}, "
            f"old_fragments={self.old_fragments!r})"
        )


@dataclass(frozen=True)
class CompactionTask:
    """One group of fragments to rewrite (pylance's ``lance.optimize.CompactionTask``).

    Attributes:
        read_version: the version the plan was made on.
        fragments: the fragments this task rewrites into one.

    Example:
        ```python
        from lance_table.optimize import Compaction

        ds.delete("id % 2 = 0")
        plan = Compaction.plan(ds, {"target_rows_per_fragment": 1_000_000})
        task = plan.tasks[0]
        print([f.id for f in task.fragments])
        Compaction.commit(ds, [task.execute(lt.dataset(uri))])
        ```
    """

    read_version: int
    fragments: list[FragmentMetadata]
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def json(self) -> str:
        """The task as pylance's JSON (``CompactionTask.json()``), for a worker of either library.

        Example:
            ```python
            from lance_table.optimize import Compaction, CompactionTask

            ds.delete("id % 2 = 0")
            task = Compaction.plan(ds, {"target_rows_per_fragment": 1_000_000}).tasks[0]
            print(CompactionTask.from_json(task.json()).fragments == task.fragments)
            ```
        """
        return _json.dumps(
            {
                "task": {"fragments": [cj.fragment_json(f) for f in self.fragments]},
                "read_version": self.read_version,
                "options": cj.options_json(self.options, None),
            },
            separators=(",", ":"),
        )

    @staticmethod
    def from_json(json: str) -> CompactionTask:
        """A task from pylance's JSON (written by :meth:`json` or by pylance's).

        Raises:
            FragmentMetadataError: the text is not such JSON (a ValueError, as pylance raises).
        """
        data = cj.load(json, "CompactionTask", ("task", "read_version", "options"))
        task = data["task"]
        fragments = cj.fragments_from_json(task.get("fragments") if isinstance(task, dict) else None, "task")
        return CompactionTask(int(data["read_version"]), fragments, cj.options_from_json(data["options"]))

    def execute(self, dataset: Any) -> RewriteResult:
        """Rewrite the task's fragments into new data files of ``dataset`` (any handle on it, in
        any process); nothing is committed.

        Raises:
            CommitConflictError: the task's fragments are not in its read version.
            UnsupportedFormatError: as :meth:`~lance_table.LanceDataset.optimize` ``.compact_files``.
        """
        snapshot = _at(dataset, self.read_version)
        [bin_] = _bins_of(snapshot, [[f.id for f in self.fragments]])
        job = job_for(
            snapshot,
            [bin_],
            self.options.get("max_bytes_per_file"),
            committing=False,
            batch_size=self.options.get("batch_size"),
            compaction_mode=self.options.get("compaction_mode"),
            binary_copy_read_batch_bytes=self.options.get("binary_copy_read_batch_bytes"),
            target_rows_per_fragment=self.options.get("target_rows_per_fragment"),
        )
        new, files = rewrite(job, bin_)
        old = [r.fragment for r in bin_.fragments]
        metrics = CompactionMetrics(
            fragments_removed=len(old),
            fragments_added=len(new),
            files_removed=sum(_files_of(f) for f in old),
            files_added=sum(_files_of(f) for f in new),
        )
        return RewriteResult(
            self.read_version,
            metrics,
            [FragmentMetadata.from_fragment(f) for f in old],
            [FragmentMetadata.from_fragment(f) for f in new],
            tuple(files),
        )


@dataclass(frozen=True)
class CompactionPlan:
    """The tasks of a compaction (pylance's ``lance.optimize.CompactionPlan``).

    Attributes:
        read_version: the version the plan was made on.
        tasks: one task per group of fragments to rewrite.

    Example:
        ```python
        from lance_table.optimize import Compaction

        ds.delete("id % 2 = 0")
        plan = Compaction.plan(ds, {"target_rows_per_fragment": 1_000_000})
        print(plan.read_version, plan.num_tasks())
        ```
    """

    read_version: int
    tasks: list[CompactionTask]
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def num_tasks(self) -> int:
        """How many tasks the plan has."""
        return len(self.tasks)

    def json(self) -> str:
        """The plan as pylance's JSON (``CompactionPlan.json()``), for workers of either library.

        Example:
            ```python
            from lance_table.optimize import Compaction, CompactionPlan

            ds.delete("id % 2 = 0")
            text = Compaction.plan(ds, {"target_rows_per_fragment": 1_000_000}).json()
            plan = CompactionPlan.from_json(text)
            Compaction.commit(ds, [task.execute(ds) for task in plan.tasks])
            ```
        """
        options = self.tasks[0].options if self.tasks else self.options
        return _json.dumps(
            {
                "tasks": [{"fragments": [cj.fragment_json(f) for f in t.fragments]} for t in self.tasks],
                "read_version": self.read_version,
                "options": cj.options_json(options, None),
            },
            separators=(",", ":"),
        )

    @staticmethod
    def from_json(json: str) -> CompactionPlan:
        """A plan from pylance's JSON (written by :meth:`json` or by pylance's).

        Raises:
            FragmentMetadataError: the text is not such JSON (a ValueError, as pylance raises).
        """
        data = cj.load(json, "CompactionPlan", ("tasks", "read_version", "options"))
        if not isinstance(data["tasks"], list):
            raise FragmentMetadataError("Could not load CompactionPlan: tasks must be a list")
        version, options = int(data["read_version"]), cj.options_from_json(data["options"])
        tasks = [
            CompactionTask(
                version,
                cj.fragments_from_json(t.get("fragments") if isinstance(t, dict) else None, f"task {i}"),
                options,
            )
            for i, t in enumerate(data["tasks"])
        ]
        return CompactionPlan(version, tasks, options)

    def __repr__(self) -> str:
        return f"CompactionPlan(read_version={self.read_version}, tasks=<{len(self.tasks)} compaction tasks>)"


def plan(dataset: Any, options: Mapping[str, Any]) -> CompactionPlan:
    """The compaction of ``dataset``'s version as tasks (none when there is nothing to compact)."""
    snapshot: Snapshot = dataset._snapshot
    job = plan_compaction(
        snapshot,
        **{k: options.get(k) for k in PLAN_OPTIONS},
        max_bytes_per_file=options.get("max_bytes_per_file"),
    )
    bins = job.bins if job is not None else []
    # (pylance's plan records the dataset's format among its options)
    options = {
        **options,
        "data_storage_version": options.get("data_storage_version") or dataset.data_storage_version,
    }
    tasks = [
        CompactionTask(
            snapshot.version,
            [FragmentMetadata.from_fragment(r.fragment) for r in bin_.fragments],
            dict(options),
        )
        for bin_ in bins
    ]
    return CompactionPlan(snapshot.version, tasks, dict(options))


def commit(dataset: Any, rewrites: Sequence[RewriteResult]) -> tuple[Snapshot, CompactionMetrics]:
    """Commit the rewrites of one plan as one compaction (``ReserveFragments``, then ``Rewrite``).

    Raises:
        ValueError: the rewrites were made on different versions.
        CommitConflictError: a concurrent delete or compaction touched the same fragments.
    """
    snapshot: Snapshot = dataset._snapshot
    if not rewrites:
        return snapshot, CompactionMetrics()
    versions = {r.read_version for r in rewrites}
    if len(versions) != 1:
        raise ValueError(
            f"the rewrites come from different versions {sorted(versions)}: commit each plan alone"
        )
    base = _at(dataset, versions.pop())
    bins = _bins_of(base, [[f.id for f in r.old_fragments] for r in rewrites])
    job = job_for(base, bins, None)
    written = [[f.to_fragment() for f in r.new_fragments] for r in rewrites]
    files = tuple(path for r in rewrites for path in r.files)
    return commit_compaction(job, written, files)
