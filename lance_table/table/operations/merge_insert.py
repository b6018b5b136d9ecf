"""merge_insert (pylance's ``MergeInsertBuilder``): the builder's choices are data
(:class:`~lance_table.table.operations.merge_plan.MergeSpec`); ``execute`` reads the source once,
plans an ``Update`` against the latest version and commits it through the one commit path,
planning again on the new latest version when a concurrent commit makes a retry worthwhile (up to
``conflict_retries`` times, within ``retry_timeout``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pyarrow as pa

from lance_table.errors import InputTypeError, MergeInsertError, UnsupportedOperationError
from lance_table.format.transaction import Transaction as StoredTransaction
from lance_table.table import versions
from lance_table.table.commit import check_can_commit, discard_elsewhere
from lance_table.table.commit.retry import retry_on_conflict
from lance_table.table.operations.merge_plan import DELETE, FAIL, UPDATE, MergeSpec, MergeStats, plan_merge
from lance_table.table.operations.merge_source import DEFAULT_MEMORY_LIMIT, MergeSource, read_source
from lance_table.table.operations.write import (
    LEGACY_FORMAT,
    resolve_data_storage_version,
    writable_data_format,
)
from lance_table.table.progress import Progress, reporter
from lance_table.table.snapshot import Snapshot

if TYPE_CHECKING:
    from lance_table.table.lance_operation import Transaction


class Handle(Protocol):
    """What the builder needs of a dataset handle: its version, and moving it after a commit."""

    _snapshot: Snapshot

    def _committed(self, snapshot: Snapshot) -> Any: ...


DEFAULT_CONFLICT_RETRIES = 10
DEFAULT_RETRY_TIMEOUT = dt.timedelta(seconds=30)
# Field metadata naming a column of the dataset's unenforced primary key (pylance's).
PRIMARY_KEY_METADATA = "lance-schema:unenforced-primary-key"
WRITE_MODES = ("auto", "rewrite_rows", "rewrite_columns")


def join_keys(snap: Snapshot, on: str | Iterable[str] | None) -> tuple[str, ...]:
    """The join columns: ``on``, or the dataset's unenforced primary key.

    Raises:
        MergeInsertError: no keys, or a key the dataset does not have.
    """
    if on is None:
        keys = tuple(
            f.name
            for f in snap.manifest.fields
            if f.parent_id == -1 and (f.metadata or {}).get(PRIMARY_KEY_METADATA, b"").lower() == b"true"
        )
    else:
        keys = (on,) if isinstance(on, str) else tuple(on)
    if not keys:
        raise MergeInsertError(
            "a merge insert operation requires join keys: specify `on` columns explicitly or configure a "
            "primary key in the dataset schema"
        )
    for k in keys:
        if k not in snap.schema.names:
            raise MergeInsertError(f"merge insert key column {k!r} does not exist in schema")
    return keys


class MergeInsertBuilder:
    """Builds and runs a merge_insert on a dataset (pylance's ``MergeInsertBuilder``): choose what
    happens to matched rows, to source rows matching nothing and to target rows no source row
    matches, then :meth:`execute` with the source data.

    Example:
        ```python
        new = pa.table({"id": [5, 1000], "score": [1.0, 0.5], "kind": ["buy", "view"]})
        counts = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(new)
        print(counts)  # {'num_inserted_rows': 1, 'num_updated_rows': 1, 'num_deleted_rows': 0}
        ```
    """

    def __init__(self, dataset: Handle, on: str | Iterable[str] | None) -> None:
        self._dataset = dataset
        self._spec = MergeSpec(join_keys(dataset._snapshot, on))
        self._retries = DEFAULT_CONFLICT_RETRIES
        self._timeout = DEFAULT_RETRY_TIMEOUT
        self._memory_limit = DEFAULT_MEMORY_LIMIT

    def _with(self, **changes: Any) -> MergeInsertBuilder:
        self._spec = replace(self._spec, **changes)
        return self

    # -- what happens to rows -----------------------------------------------------------------------

    def when_matched_update_all(self, condition: str | None = None) -> MergeInsertBuilder:
        """Replace matched target rows by their source rows; with ``condition`` (SQL over
        ``source.`` and ``target.`` columns) only the pairs satisfying it."""
        return self._with(matched=UPDATE, matched_condition=condition)

    def when_matched_delete(self) -> MergeInsertBuilder:
        """Delete the matched target rows."""
        return self._with(matched=DELETE, matched_condition=None)

    def when_matched_fail(self) -> MergeInsertBuilder:
        """Fail (nothing is committed) if any source row matches a target row."""
        return self._with(matched=FAIL, matched_condition=None)

    def when_not_matched_insert_all(self) -> MergeInsertBuilder:
        """Insert the source rows that match no target row."""
        return self._with(insert=True)

    def when_not_matched_by_source_delete(self, expr: str | None = None) -> MergeInsertBuilder:
        """Delete the target rows no source row matches (only those satisfying ``expr``, if given)."""
        return self._with(by_source_delete=True, by_source_condition=expr)

    # -- how it runs --------------------------------------------------------------------------------

    def conflict_retries(self, max_retries: int) -> MergeInsertBuilder:
        """Plan and commit again up to ``max_retries`` times when a concurrent commit conflicts
        (default 10)."""
        self._retries = int(max_retries)
        return self

    def retry_timeout(self, timeout: dt.timedelta | float) -> MergeInsertBuilder:
        """No new attempt starts after ``timeout`` (a timedelta or seconds; default 30 seconds);
        the first always runs."""
        self._timeout = timeout if isinstance(timeout, dt.timedelta) else dt.timedelta(seconds=timeout)
        return self

    def use_index(self, use_index: bool) -> MergeInsertBuilder:
        """Accepted for pylance's API; lance_table always matches by scanning the key columns."""
        return self

    def write_mode(self, mode: Literal["auto", "rewrite_rows", "rewrite_columns"]) -> MergeInsertBuilder:
        """How merged rows are written: ``auto`` and ``rewrite_rows`` rewrite whole rows.

        Raises:
            MergeInsertError: an unknown mode.
            UnsupportedOperationError: ``rewrite_columns``, which lance_table does not write.
        """
        if mode not in WRITE_MODES:
            raise MergeInsertError(f"write_mode must be one of {WRITE_MODES}, not {mode!r}")
        if mode == "rewrite_columns":
            raise UnsupportedOperationError("merge_insert write_mode('rewrite_columns') is not supported")
        return self

    def data_storage_version(self, version: str) -> MergeInsertBuilder:
        """Write the new files in data format ``version``: lance_table takes only the format the
        dataset's files have (it does not read datasets whose files mix formats).

        Raises:
            ValueError: an unknown version, or one of the other family (legacy or 2.x).
            UnsupportedOperationError: a version other than the dataset's.
        """
        fmt = resolve_data_storage_version(version)
        snap = self._dataset._snapshot
        current = writable_data_format(snap.manifest, snap.uri)
        if (fmt == LEGACY_FORMAT) != (current == LEGACY_FORMAT):
            raise MergeInsertError(
                f"data_storage_version {version!r} is of another family than the dataset's ({current})"
            )
        if fmt != current:
            raise UnsupportedOperationError(
                f"merge_insert data_storage_version {version!r}: the dataset's files are format {current}, "
                "and lance_table does not read datasets whose files mix formats"
            )
        return self._with(data_format=fmt)

    def target_bases(self, bases: list[str]) -> MergeInsertBuilder:
        """Write the merge's new data files to these registered bases, by name or path (the
        dataset's URI: its own directory), one file each in turn, as ``write_dataset``'s
        ``target_bases``; deletion files stay in the dataset's own directory.

        Raises:
            TypeError: ``bases`` is not a list of strings.
            BasePathError: (on execute) a reference names no base, or :meth:`target_all_bases` too.
        """
        if isinstance(bases, str) or not all(isinstance(b, str) for b in bases):
            raise TypeError(f"target_bases takes a list of base names or paths, got {bases!r}")
        return self._with(target_bases=tuple(bases))

    def target_all_bases(self, include_primary: bool = True) -> MergeInsertBuilder:
        """Write the merge's new data files to every registered base in turn, the dataset's own
        directory first when ``include_primary``.

        Raises:
            BasePathError: (on execute) :meth:`target_bases` too, or no base to write to.
        """
        return self._with(target_all_bases=bool(include_primary))

    def mark_sstables_as_compacted(self, sstables: list[Any]) -> MergeInsertBuilder:
        """Raises:
        UnsupportedOperationError: lance_table has no MemWAL.
        """
        raise UnsupportedOperationError("merge_insert mark_sstables_as_compacted is not supported")

    def memory_limit(self, nbytes: int) -> MergeInsertBuilder:
        """(lance_table only) Bytes of source rows kept in memory; a larger source is spilled to a
        temporary file and its keys are matched in several passes of about this size."""
        if nbytes <= 0:
            raise MergeInsertError("memory_limit must be positive")
        self._memory_limit = int(nbytes)
        return self

    def explain_plan(self, schema: pa.Schema | None = None, verbose: bool = False) -> str:
        """A description of what :meth:`execute` would do (lance_table's plan, not DataFusion's)."""
        return self._plan_text("")

    def analyze_plan(self, data_obj: Any, *, schema: pa.Schema | None = None) -> str:
        """Run the merge of ``data_obj`` without committing it (the files it wrote are deleted) and
        return :meth:`explain_plan`'s text with the time taken and pylance's metric names.

        Raises:
            (what :meth:`execute` raises, except conflicts)
        """
        self._check()
        snap = self._dataset._snapshot
        start = time.perf_counter()
        with self._source(data_obj, schema) as source:
            pending, stats = plan_merge(snap, self._spec, source, self._memory_limit)
        elapsed = time.perf_counter() - start
        sizes = [snap.storage.size(p) for p in pending.written]
        for path in pending.written:
            snap.storage.delete(path)
        discard_elsewhere(snap.storage, snap.manifest, pending)
        metrics = (
            f"elapsed={elapsed * 1000:.3f}ms, metrics=[bytes_written={sum(sizes)}, "
            f"num_deleted_rows={stats.deleted}, num_files_written={len(sizes)}, "
            f"num_inserted_rows={stats.inserted}, num_updated_rows={stats.updated}]"
        )
        return self._plan_text(metrics)

    def _plan_text(self, metrics: str) -> str:
        s = self._spec
        lines = [
            f"MergeInsert: {metrics + ', ' if metrics else ''}on=[{', '.join(s.on)}], "
            f"when_matched={s.matched or 'DoNothing'}"
            + (f" if {s.matched_condition}" if s.matched_condition else "")
            + f", when_not_matched={'InsertAll' if s.insert else 'DoNothing'}"
            + f", when_not_matched_by_source={'Delete' if s.by_source_delete else 'Keep'}"
            + (f" if {s.by_source_condition}" if s.by_source_condition else ""),
            f"  KeyMatch: fragments of version {self._dataset._snapshot.version}, "
            f"columns=[{', '.join(s.on)}]",
        ]
        return "\n".join(lines) + "\n"

    # -- running ------------------------------------------------------------------------------------

    def _check(self) -> None:
        s = self._spec
        if s.matched in (None, FAIL) and not s.insert and not s.by_source_delete:
            raise MergeInsertError("the merge insert job is not configured to change the data in any way")

    def _source(self, data: Any, schema: pa.Schema | None) -> MergeSource:
        snap = self._dataset._snapshot
        return read_source(data, schema, snap.schema, self._spec.on, snap.uri, self._memory_limit)

    def execute(
        self, data_obj: Any, *, schema: pa.Schema | None = None, progress: Progress = None
    ) -> dict[str, int]:
        """Merge ``data_obj`` (any input ``write_dataset`` takes) into the dataset and commit;
        returns pylance's statistics (``num_inserted_rows``, ``num_updated_rows``,
        ``num_deleted_rows``). The dataset handle moves to the new version.

        ``progress`` (lance_table's): a bar on stderr when it is a terminal (None, the default;
        needs tqdm), always (True) or never (False), or a callable receiving
        :class:`~lance_table.progress.ProgressEvent` records (phases ``match`` and ``write``; a
        retry after a conflict starts them again).

        Raises:
            MergeInsertError: nothing would change (no clause set).
            MergeSourceError: the source's columns do not fit the dataset's; several source rows
                match one target row; a row matched under ``when_matched_fail``.
            InputTypeError: the data is of no kind a write takes.
            FilterError: a condition does not parse.
            CommitConflictError: conflicts went on past the retries or the timeout, or a concurrent
                commit makes the merge impossible.
            UnsupportedFormatError: blob v2 columns lance_table does not write (nested ones,
                external blobs read back for a source without the column).
            InputTypeError: also when ``progress`` is of no kind taken.
        """
        self._check()
        report = reporter("merge_insert", progress)
        ds = self._dataset
        versions.check_writable(ds._snapshot.manifest, ds._snapshot.uri)
        check_can_commit(ds._snapshot.commit_options, ds._snapshot.storage)
        with self._source(data_obj, schema) as source, report:

            def attempt(snap: Snapshot) -> tuple[Snapshot, MergeStats]:
                pending, stats = plan_merge(snap, self._spec, source, self._memory_limit, report)
                return snap.commit(pending), stats

            committed, stats = retry_on_conflict(ds._snapshot, attempt, self._retries, self._timeout)
        ds._committed(committed)
        return stats.as_dict()

    def execute_uncommitted(
        self, data_obj: Any, *, schema: pa.Schema | None = None, progress: Progress = None
    ) -> tuple[Transaction, dict[str, int]]:
        """Write the merge's files without committing; returns the transaction (pylance's, to
        commit with ``LanceDataset.commit``) and the statistics :meth:`execute` returns.
        ``progress`` as :meth:`execute`'s.

        Raises:
            (what :meth:`execute` raises, except conflicts)
        """
        from lance_table.table.operations.transactions import to_python

        self._check()
        report = reporter("merge_insert", progress)
        snap = self._dataset._snapshot
        with self._source(data_obj, schema) as source, report:
            pending, stats = plan_merge(snap, self._spec, source, self._memory_limit, report)
        stored = StoredTransaction(read_version=pending.read_version, operation=pending.operation)
        return to_python(stored), stats.as_dict()

    # -- pylance's stream variants: a RecordBatchReader (or any Arrow stream), read once -------------

    def execute_batches(self, new_data: Any) -> dict[str, int]:
        """:meth:`execute` of a stream of batches (pylance's ``execute_batches``): a
        ``pyarrow.RecordBatchReader`` or any object with ``__arrow_c_stream__`` (a Table too),
        read batch by batch (a source larger than the memory limit is spilled, not held).

        Raises:
            InputTypeError: ``new_data`` is not an Arrow stream (a TypeError, as pylance raises);
                otherwise what :meth:`execute` raises.
        """
        return self.execute(_stream(new_data))

    def execute_uncommitted_batches(self, new_data: Any) -> tuple[Transaction, dict[str, int]]:
        """:meth:`execute_uncommitted` of a stream of batches (pylance's
        ``execute_uncommitted_batches``; ``new_data`` as :meth:`execute_batches` takes it).

        Raises:
            InputTypeError: ``new_data`` is not an Arrow stream; otherwise what
                :meth:`execute_uncommitted` raises.
        """
        return self.execute_uncommitted(_stream(new_data))

    def analyze_plan_batches(self, new_data: Any) -> str:
        """:meth:`analyze_plan` of a stream of batches (pylance's ``analyze_plan_batches``;
        ``new_data`` as :meth:`execute_batches` takes it). Nothing is committed.

        Raises:
            InputTypeError: ``new_data`` is not an Arrow stream; otherwise what
                :meth:`analyze_plan` raises.
        """
        return self.analyze_plan(_stream(new_data))


def _stream(new_data: Any) -> pa.RecordBatchReader:
    """``new_data`` as a reader, as pylance's stream variants take it.

    Raises:
        InputTypeError: it is neither a ``RecordBatchReader`` nor an Arrow C stream.
    """
    if isinstance(new_data, pa.RecordBatchReader):
        return new_data
    if hasattr(new_data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(new_data)
    raise InputTypeError(f"Expected instance of pyarrow.lib.RecordBatchReader, got {type(new_data).__name__}")
