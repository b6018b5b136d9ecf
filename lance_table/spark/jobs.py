"""Long operations as Spark jobs: what every job shares.

A job plans on the driver against one version, runs its per-fragment work as Spark tasks on the
executors, collects what the tasks wrote and commits once on the driver. Every file a job's tasks
write carries the job's tag in its name (data files) or id (deletion files), so the job finds them
all, including those of attempts Spark retried, speculated or cancelled, whose output it never
collected:

- The driver commits only what the successful attempts returned (one per partition).
- Afterwards, committed or not, it writes the job's marker (a task that starts a file after the
  marker exists stops and deletes its files) and deletes the tagged files that no version
  committed since the planned one references. A job that fails thus leaves the dataset as it was.

Errors of lance_table that retrying cannot cure (a source row matched twice, a filter that does
not parse) travel back to the driver inside the task's result and are raised there, typed, after
the clean-up; other task failures are Spark's to retry.

The test hook :data:`FAIL_PROPERTY` (a Spark local property) makes the task of partition 0 crash
(its Python worker exits) after writing its files: ``first-attempt`` on its first attempt only,
``always`` on every attempt (the job fails; the other tasks' files must go too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lance_table.errors import (
    LanceTableError,
    StorageCredentialsError,
    StorageUnreachableError,
    VersionGoneError,
    WriteAbortedError,
)
from lance_table.format import paths
from lance_table.format.transaction import Transaction as StoredTransaction
from lance_table.spark.options import merge_storage, task_storage_options
from lance_table.spark.worker import settle_worker
from lance_table.storage import Storage, open_storage
from lance_table.table import versions
from lance_table.table.operations.cleanup_references import referenced_files
from lance_table.table.snapshot import Snapshot

log = logging.getLogger(__name__)

T = TypeVar("T")

# Spark local property read by the tasks: "first-attempt" or "always" makes them crash (tests).
FAIL_PROPERTY = "lance_table.jobs.testFailure"
# lance_table errors a retry of the task may cure: Spark retries them.
_TRANSIENT = (StorageUnreachableError, StorageCredentialsError, WriteAbortedError)


@dataclass
class TaskOutput:
    """What one task attempt returns to the driver: its result (or a lance_table error to raise
    there) and the files it wrote."""

    partition: int
    attempt: int
    payload: Any
    files: tuple[str, ...]
    error: BaseException | None = None


def task_identity() -> tuple[int, int]:
    """The running task's partition and attempt number ((0, 0) outside Spark)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - only outside Spark
        return 0, 0
    return ctx.partitionId(), ctx.attemptNumber()


def _test_failure(partition: int, attempt: int) -> None:
    """The test hook: crash the Python worker (no clean-up runs) when :data:`FAIL_PROPERTY` asks."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    mode = ctx.getLocalProperty(FAIL_PROPERTY) if ctx is not None else None
    if partition == 0 and (mode == "always" or (mode == "first-attempt" and attempt == 0)):
        os._exit(17)


def _deterministic(exc: BaseException) -> bool:
    """A lance_table error that a new attempt would raise again."""
    return isinstance(exc, LanceTableError) and not isinstance(exc, _TRANSIENT)


@dataclass
class JobSpec:
    """What a task needs to open the job's dataset at the planned version (pickled to executors)."""

    uri: str
    storage_options: Mapping[str, Any] | None
    version: int
    tag: str

    def storage(self) -> Storage:
        """The dataset's storage, with the task's session storage options under the job's."""
        return open_storage(self.uri, merge_storage(task_storage_options(), self.storage_options))

    def snapshot(self) -> Snapshot:
        """The planned version of the dataset."""
        import lance_table as lt

        opts = merge_storage(task_storage_options(), self.storage_options)
        return lt.dataset(self.uri, version=self.version, storage_options=opts)._snapshot

    def run_task(self, body: Callable[[Snapshot], tuple[Any, Sequence[str]]]) -> TaskOutput:
        """Run one task's work: ``body`` gets the planned version and returns its result and the
        files it wrote (it deletes them itself when it raises). A deterministic lance_table error
        comes back in the output; other errors fail the attempt (Spark retries it).

        Raises:
            WriteAbortedError: the job is over (its marker exists); this attempt's files are gone.
        """
        settle_worker()
        partition, attempt = task_identity()
        self._check_running(partition, attempt)
        snap = self.snapshot()
        try:
            payload, files = body(snap)
        except Exception as exc:
            if _deterministic(exc):
                return TaskOutput(partition, attempt, None, (), exc)
            raise
        _test_failure(partition, attempt)
        try:
            self._check_running(partition, attempt)  # the files are complete: the job sees them
        except WriteAbortedError:
            _delete(snap.storage, files)
            raise
        return TaskOutput(partition, attempt, payload, tuple(files))

    def _check_running(self, partition: int, attempt: int) -> None:
        if self.storage().exists(paths.aborted_write_path(self.tag)):
            raise WriteAbortedError(
                f"the job on {self.uri} is over (partition {partition}, attempt {attempt})"
            )


def new_job(uri: str, storage_options: Mapping[str, Any] | None, version: int) -> JobSpec:
    """A job on version ``version`` of ``uri``, with a new tag."""
    opts = dict(storage_options) if storage_options else None
    return JobSpec(uri, opts, version, uuid.uuid4().hex[: paths.WRITE_TAG_LENGTH])


def run_job(
    job: JobSpec,
    launch: Callable[[], list[TaskOutput]],
    commit: Callable[[list[Any]], T],
) -> T:
    """Run the tasks (``launch`` collects their outputs), then ``commit`` their results (in
    partition order) once; then delete the job's files no version references. On any failure
    the job's files are deleted and the error raised (a task's lance_table error as it was).

    Raises:
        whatever a task's deterministic error, ``launch`` (Spark's job failure) or ``commit``
        raise.
    """
    try:
        outputs = launch()
        chosen: dict[int, TaskOutput] = {}
        for out in sorted(outputs, key=lambda o: (o.partition, o.attempt)):
            chosen.setdefault(out.partition, out)  # one attempt per partition
        errors = [o.error for o in chosen.values() if o.error is not None]
        if errors:
            raise errors[0]
        result = commit([chosen[p].payload for p in sorted(chosen)])
    except BaseException:
        finish_job(job)
        raise
    finish_job(job)
    return result


def finish_job(job: JobSpec) -> None:
    """Mark the job over and delete its files that no version after the planned one references
    (nothing when the versions cannot be read: cleanup removes them after its grace period)."""
    storage = open_storage(job.uri, job.storage_options)
    try:
        storage.write(paths.aborted_write_path(job.tag), b"")
    except Exception:
        log.warning("could not mark the job on %s as over", job.uri, exc_info=True)
    files = [
        e.path for e in storage.list_dir(paths.DATA_DIR, stat=False) if paths.has_write_tag(e.name, job.tag)
    ]
    files += [
        e.path
        for e in storage.list_dir(paths.DELETIONS_DIR, stat=False)
        if paths.has_deletion_tag(e.name, job.tag)
    ]
    if not files:
        return
    try:
        keep: set[str] = set()
        for entry in versions.list_versions(storage):
            if entry.version > job.version:
                with contextlib.suppress(VersionGoneError):
                    keep |= referenced_files(versions.read_manifest_file(storage, entry).manifest)
    except Exception:
        log.warning("the versions of %s could not be read: the job's files stay", job.uri, exc_info=True)
        return
    _delete(storage, [f for f in files if f not in keep])


def _delete(storage: Storage, files: Sequence[str]) -> None:
    for path in files:
        with contextlib.suppress(OSError):
            storage.delete(path)


def run_fragment_tasks(
    spark: Any, job: JobSpec, items: Sequence[Any], task: Callable[[Any], TaskOutput]
) -> list[TaskOutput]:
    """One Spark task per item (``task(item)`` runs on an executor); the outputs collected."""
    if not items:
        return []
    rdd = spark.sparkContext.parallelize(list(items), len(items))
    return rdd.map(task).collect()


def commit_transaction(job: JobSpec, operation: Any, message: str | None = None) -> Any:
    """Commit ``operation`` (a stored operation) on the planned version through the public commit
    API (``LanceDataset.commit`` with ``read_version``); the new version's dataset.

    Raises:
        CommitConflictError: a concurrent commit makes this one impossible.
    """
    import lance_table as lt
    from lance_table.table.operations.transactions import to_python

    txn = to_python(StoredTransaction(read_version=job.version, operation=operation))
    return lt.LanceDataset.commit(
        job.uri, txn, read_version=job.version, storage_options=job.storage_options, commit_message=message
    )
