"""Progress of long operations: one :class:`Reporter` per operation, fed at file and batch
granularity by the code doing the work, and turned into what the caller asked for with the
``progress=`` argument (see :data:`Progress`):

- ``None`` (the default): a tqdm bar on stderr when stderr is a terminal and tqdm is installed
  (the ``progress`` extra); nothing otherwise.
- ``True``: a bar whatever stderr is. Without tqdm, nothing, and one :class:`ProgressWarning`
  per process saying so.
- ``False``: nothing.
- a callable: called with a :class:`ProgressEvent` at the start of each phase, as work advances,
  and when the operation completes (no bar).
- an object with ``begin(fragment)`` and ``complete(fragment)`` methods (pylance's
  ``FragmentWriteProgress``): called before and after each data file written, with its
  :class:`~lance_table.table.fragment_metadata.FragmentMetadata` (no bar).

When nothing is shown, operations get :data:`SILENT`, whose methods do nothing.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from lance_table.errors import InputTypeError
from lance_table.format.manifest import Fragment
from lance_table.table.fragment_metadata import DataFile, FragmentMetadata

EventKind = Literal["start", "progress", "complete"]


@dataclass(frozen=True)
class ProgressEvent:
    """Where an operation stands: counts done in its current phase, and their totals when known.

    Within one phase the counts never decrease; a new phase starts again from zero (a ``start``
    event), and an operation that retries after a commit conflict starts its phases again.

    Attributes:
        operation: ``write``, ``write_fragments``, ``compact``, ``cleanup``, ``merge_insert``,
            ``update`` or ``add_columns``.
        phase: the part of the operation: ``write`` (rows into new data files), ``scan`` (rows read
            to find the ones to change), ``match`` (a merge's join of the keys), ``rewrite``
            (compaction), ``versions`` and ``files`` (cleanup: manifests and files deleted).
        event: ``start`` (a phase begins), ``progress`` or ``complete`` (the operation is done).
        rows: rows processed in the phase.
        files: data files written (files deleted, for cleanup).
        bytes: bytes of those files.
        rows_total, files_total, bytes_total: what the phase will process, or None if not known.
        elapsed: seconds since the phase started.

    Example:
        ```python
        from lance_table.progress import ProgressEvent

        def show(event: ProgressEvent) -> None:
            if event.event == "complete":
                print(f"{event.operation}: {event.rows} rows, {event.files} files, {event.bytes} bytes")

        lt.write_dataset(table, uri, mode="append", progress=show)  # write: 10 rows, 1 files, ...
        ```
    """

    operation: str
    phase: str
    event: EventKind
    rows: int = 0
    files: int = 0
    bytes: int = 0
    rows_total: int | None = None
    files_total: int | None = None
    bytes_total: int | None = None
    elapsed: float = 0.0

    @property
    def rows_per_second(self) -> float | None:
        """The phase's rate in rows per second so far (None at its very start)."""
        return self.rows / self.elapsed if self.elapsed > 0 else None

    @property
    def bytes_per_second(self) -> float | None:
        """The phase's rate in bytes per second so far (None at its very start)."""
        return self.bytes / self.elapsed if self.elapsed > 0 else None

    @property
    def fraction(self) -> float | None:
        """Share of the phase done (by rows, else files, else bytes), when its total is known."""
        for done, total in (
            (self.rows, self.rows_total),
            (self.files, self.files_total),
            (self.bytes, self.bytes_total),
        ):
            if total:
                return min(done / total, 1.0)
        return None


class FragmentHooks(Protocol):
    """pylance's ``FragmentWriteProgress`` contract: ``begin`` before a data file is written,
    ``complete`` once it is, each with the fragment's metadata."""

    def begin(self, fragment: FragmentMetadata) -> Any: ...

    def complete(self, fragment: FragmentMetadata) -> Any: ...


#: What a ``progress=`` argument takes (see the module's documentation).
Progress = bool | None | Callable[[ProgressEvent], Any] | FragmentHooks


class ProgressWarning(UserWarning):
    """A progress bar was asked for (``progress=True``) but tqdm is not installed."""


class Reporter:
    """The progress of one operation. Thread-safe: the workers of an operation report at once.

    Use as a context manager: leaving it without an error sends the ``complete`` event, and any
    bar is closed either way. ``callback`` gets the events; ``bar``: draw tqdm bars; ``hooks``:
    pylance's ``FragmentWriteProgress``, told of each data file with ``fragment_id`` as its id.
    """

    active = True

    def __init__(
        self,
        operation: str,
        *,
        callback: Callable[[ProgressEvent], Any] | None = None,
        bar: bool = False,
        hooks: FragmentHooks | None = None,
        fragment_id: int = 0,
    ) -> None:
        self.operation = operation
        self._callback = callback
        self._bar: _Bar | None = None if bar is False else _Bar(operation)
        self._hooks = hooks
        self._fragment_id = fragment_id
        self._lock = threading.Lock()
        self._phase = ""
        self._totals: tuple[int | None, int | None, int | None] = (None, None, None)
        self._rows = self._files = self._bytes = 0
        self._started = time.monotonic()

    @property
    def ordered(self) -> bool:
        """Whether each file must be complete before the next begins (fragment hooks see them in
        order; writers then close files in the foreground)."""
        return self._hooks is not None

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        try:
            if kind is None:
                with self._lock:
                    self._emit("complete")
        finally:
            if self._bar is not None:
                self._bar.close()

    def phase(
        self,
        name: str,
        *,
        rows_total: int | None = None,
        files_total: int | None = None,
        bytes_total: int | None = None,
    ) -> None:
        """Start phase ``name``: its counts start from zero, with the totals given (if known)."""
        with self._lock:
            self._phase = name
            self._totals = (rows_total, files_total, bytes_total)
            self._rows = self._files = self._bytes = 0
            self._started = time.monotonic()
            if self._bar is not None:
                self._bar.start(name, rows_total, files_total)
            self._emit("start")

    def advance(self, rows: int = 0, files: int = 0, nbytes: int = 0) -> None:
        """Count ``rows``, ``files`` and ``nbytes`` more done in the current phase."""
        with self._lock:
            self._rows += rows
            self._files += files
            self._bytes += nbytes
            if self._bar is not None:
                self._bar.update(rows, files, self._files, self._bytes, time.monotonic() - self._started)
            self._emit("progress")

    def file_started(self, path: str, major: int, minor: int) -> None:
        """A data file ``path`` (its name under ``data/``) is about to be written."""
        if self._hooks is not None:
            data = DataFile(path, [], [], major, minor)
            self._hooks.begin(FragmentMetadata(self._fragment_id, [data], 0))

    def file_written(self, fragment: Fragment) -> None:
        """A data file is written: ``fragment`` holds it (its id is not yet given)."""
        size = sum(f.file_size_bytes or 0 for f in fragment.files)
        self.advance(files=1, nbytes=size)
        if self._hooks is not None:
            meta = FragmentMetadata.from_fragment(fragment)
            meta.id = self._fragment_id
            self._hooks.complete(meta)

    def _emit(self, kind: EventKind) -> None:
        if self._callback is None:
            return
        rows_total, files_total, bytes_total = self._totals
        self._callback(
            ProgressEvent(
                self.operation,
                self._phase,
                kind,
                self._rows,
                self._files,
                self._bytes,
                rows_total,
                files_total,
                bytes_total,
                time.monotonic() - self._started,
            )
        )


class _Silent(Reporter):
    """Reports nothing, at no cost."""

    active = False

    def __init__(self) -> None:
        pass

    @property
    def ordered(self) -> bool:
        return False

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        pass

    def phase(
        self,
        name: str,
        *,
        rows_total: int | None = None,
        files_total: int | None = None,
        bytes_total: int | None = None,
    ) -> None:
        pass

    def advance(self, rows: int = 0, files: int = 0, nbytes: int = 0) -> None:
        pass

    def file_started(self, path: str, major: int, minor: int) -> None:
        pass

    def file_written(self, fragment: Fragment) -> None:
        pass


#: The reporter of an operation nobody watches.
SILENT: Reporter = _Silent()

_warned = False


def reporter(operation: str, progress: Progress, *, fragment_id: int = 0) -> Reporter:
    """The reporter of ``operation`` for a ``progress=`` argument (see the module's documentation);
    ``fragment_id``: the id fragment hooks see (``LanceFragment.create``'s).

    Raises:
        InputTypeError: ``progress`` is none of the kinds taken (also a TypeError).
    """
    if progress is None:
        show = _stderr_is_terminal() and _have_tqdm()
        return Reporter(operation, bar=True) if show else SILENT
    if progress is True:
        if sys.stderr is None:  # (no stderr at all: nowhere to draw)
            return SILENT
        if _have_tqdm():
            return Reporter(operation, bar=True)
        _warn_no_tqdm()
        return SILENT
    if progress is False:
        return SILENT
    if callable(getattr(progress, "begin", None)) and callable(getattr(progress, "complete", None)):
        return Reporter(operation, hooks=progress, fragment_id=fragment_id)  # type: ignore[arg-type]
    if callable(progress):
        return Reporter(operation, callback=progress)
    raise InputTypeError(
        f"progress must be None, True, False, a callable taking a ProgressEvent or a "
        f"FragmentWriteProgress, not {type(progress).__name__}"
    )


def known_rows(data: Any) -> int | None:
    """How many rows ``data`` (what a write takes) holds, when that is known without reading it."""
    import pyarrow as pa

    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return int(data.num_rows)
    shape = getattr(data, "shape", None)  # pandas and Polars DataFrames
    if isinstance(shape, tuple) and len(shape) == 2 and isinstance(shape[0], int):
        return shape[0]
    return None


def _stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


def _have_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _warn_no_tqdm() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            "progress=True shows a progress bar only with tqdm installed "
            "(pip install 'lance_table[progress]'); showing none",
            ProgressWarning,
            stacklevel=4,
        )


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1000
    raise AssertionError("unreachable")


class _Bar:
    """One tqdm bar per phase, on the stderr of the moment, left on screen when the phase ends.
    Its counter counts rows, or files in a phase that counts files only (cleanup); the files
    written, their bytes and the byte rate follow it."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._bar: Any = None
        self._files_only = False

    def start(self, phase: str, rows_total: int | None, files_total: int | None) -> None:
        from tqdm import tqdm

        self.close()
        self._files_only = rows_total is None and files_total is not None
        total = files_total if self._files_only else rows_total
        self._bar = tqdm(
            total=total,
            unit="files" if self._files_only else "rows",
            unit_scale=total is None or total >= 10_000,  # (small counts are shown as they are)
            desc=self.operation if phase == self.operation else f"{self.operation} {phase}",
            file=sys.stderr,
            leave=True,
            dynamic_ncols=True,
            disable=False,
        )

    def update(self, rows: int, files: int, files_done: int, nbytes: int, elapsed: float) -> None:
        if self._bar is None:
            return
        if files and not self._files_only:
            rate = f", {_size(nbytes / elapsed)}/s" if elapsed > 0 else ""
            self._bar.set_postfix_str(f"{files_done} files, {_size(nbytes)}{rate}", refresh=False)
        elif files and nbytes:
            self._bar.set_postfix_str(_size(nbytes), refresh=False)
        self._bar.update(files if self._files_only else rows)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


__all__ = [
    "SILENT",
    "FragmentHooks",
    "Progress",
    "ProgressEvent",
    "ProgressWarning",
    "Reporter",
    "known_rows",
    "reporter",
]
