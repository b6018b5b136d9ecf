"""Thread pools. Work on whole fragments runs on one pool, page decoding on a second and the
pieces of one big page on a third, so a task can wait on tasks of the next pool without deadlock.
Writers encode their columns on a fourth (whose tasks may wait on the pieces' pool), write a
batch's pages on a fifth while the next batch is encoded, and close a finished file on a sixth
(whose tasks wait on the fourth and fifth) while the next file is written. Maps called inside the
tasks of a map of even tasks that already keeps every worker busy run inline; inside a map that
gives every core a task at least (and inside the maps its tasks call), the parts of one page
are not cut: no core would be idle to take them, and joining them costs a copy.

The pools are the process's own: a child forked from a process that used them (Spark's Python
workers, ``multiprocessing`` with ``fork``) starts with none and makes its own on first use.
``LANCE_CPU_THREADS`` and ``LANCE_IO_THREADS`` (pylance's names) bound the threads of each pool;
set them on Spark's executors with ``spark.executorEnv.LANCE_CPU_THREADS``. A thread given one core
while others keep the rest busy (a Spark task) keeps its CPU work to itself (:func:`on_one_core`)."""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
R = TypeVar("R")

FRAGMENTS = "lance_table-frag"
DECODE = "lance_table-decode"
PARTS = "lance_table-part"
ENCODE = "lance_table-encode"
WRITE = "lance_table-write"  # page writes of file writers, overlapping the next batch's encoding
CLOSE = "lance_table-close"  # closing a finished data file while the next one is written
METADATA = "lance_table-meta"  # reads of many small metadata files (manifests of a history)
IO = "lance_table-io"  # fragments of a remote store, many at once: their time is spent waiting
#: the pages of one read of a remote file read in part, many at once: each waits on its requests
#: (tasks of :data:`IO` may wait on it)
PAGE_IO = "lance_table-pageio"
#: the byte ranges of one remote file read at once by a client that sends one request per call
#: (pyarrow's S3 files); tasks of :data:`IO` and :data:`PAGE_IO` wait on it
ARROW_READS = "lance_table-arrowreads"

_POOLS: dict[str, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()
# Set on a thread while it runs a task of a map that keeps every worker busy: maps called from
# such a task run inline (more threads would only share the same cores and add hand-offs).
_BUSY = threading.local()


def _threads_setting(name: str, default: int) -> int:
    """A thread count from the environment variable ``name``, or ``default`` when unset.

    Raises:
        ValueError: the variable is set to something other than a positive integer, naming it.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"environment variable {name} must be a positive integer, got {raw!r}")
    return value


def workers() -> int:
    """The number of threads of each pool: ``LANCE_CPU_THREADS``, else the cores (at most 8).

    Raises:
        ValueError: ``LANCE_CPU_THREADS`` is not a positive integer.
    """
    return _threads_setting("LANCE_CPU_THREADS", min(8, _CORES))


#: the cores of the machine, as :func:`workers` counts them by default (``os.cpu_count`` reads
#: the kernel's list of cores each call: some microseconds that every write paid several times)
_CORES = os.cpu_count() or 2


#: the most threads of the I/O pool by default: the most fragment reads of a remote store in flight
IO_THREADS = 64


def io_threads() -> int:
    """The threads of the I/O pool: ``LANCE_IO_THREADS``, else :data:`IO_THREADS`.

    Raises:
        ValueError: ``LANCE_IO_THREADS`` is not a positive integer.
    """
    return _threads_setting("LANCE_IO_THREADS", IO_THREADS)


def after_fork_in_child(fn: Callable[[], None]) -> None:
    """Run ``fn`` in every child process forked from this one (where ``os.fork`` exists): it
    replaces locks another thread may have held at the fork and drops what lives on threads or
    connections of the parent."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=fn)


def _reset_after_fork() -> None:
    """A forked child has none of its parent's pool threads: it starts without pools."""
    global _LOCK, _BUSY
    _POOLS.clear()
    _LOCK = threading.Lock()
    _BUSY = threading.local()


after_fork_in_child(_reset_after_fork)


def pool(name: str) -> ThreadPoolExecutor:
    """The process-wide pool called ``name`` (numpy, pyarrow and file reads release the GIL).

    Each has :func:`workers` threads, but :data:`IO`, :data:`PAGE_IO` and :data:`ARROW_READS`,
    whose tasks mostly wait on a remote store, which have :func:`io_threads`.

    Raises:
        ValueError: the thread count's environment variable is not a positive integer.
    """
    with _LOCK:
        found = _POOLS.get(name)
        if found is None:
            size = io_threads() if name in (IO, PAGE_IO, ARROW_READS) else workers()
            found = _POOLS[name] = ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)
        return found


def map_on(
    name: str, fn: Callable[[T], R], items: Iterable[T], *, even: bool = False, helping: bool = False
) -> list[R]:
    """``[fn(x) for x in items]``, in order, on pool ``name`` when there is more than one item
    (inline when already on that pool, which would otherwise wait on itself, or inside a task of
    a map that keeps every worker busy). ``even`` says the tasks take about the same time: then
    :data:`BUSY_TASKS` of them per worker keep every worker busy to the end. ``helping``: the
    calling thread makes the first call itself while the pool makes the others (a hand-off
    fewer: on a busy machine each one waits for a core to be free).

    If one call fails, the calls not yet started are cancelled and the running ones finish before
    the error is raised: no work of a failed operation goes on in the background.
    """
    items = list(items)
    if len(items) < 2 or _inline(name):
        return [fn(x) for x in items]
    task = _busy(fn) if even and len(items) >= BUSY_TASKS * workers() else fn
    if task is fn and (getattr(_BUSY, "filled", False) or (even and len(items) >= _cores())):
        task = _filled(fn)
    # each task runs in the caller's context (what it collects, e.g. a scan's read counts)
    rest = items[1:] if helping else items
    futures = [pool(name).submit(contextvars.copy_context().run, task, x) for x in rest]
    try:
        first = [contextvars.copy_context().run(task, items[0])] if helping else []
        return first + [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        wait(futures)
        raise


def ahead_on(
    name: str, fn: Callable[[T], R], items: Iterable[T], depth: int, *, even: bool = False
) -> Generator[R, None, None]:
    """``fn(x) for x in items``, in order, with up to ``depth`` calls running ahead of the
    consumer on pool ``name`` (inline when ``depth`` is 0 or as :func:`map_on` would be; a depth
    of a task per worker keeps every worker busy when the tasks are ``even``).

    ``items`` is drawn lazily. When the consumer stops early or a call fails, the calls not yet
    started are cancelled and the running ones finish: nothing goes on in the background.
    """
    if depth < 1 or _inline(name):
        for x in items:
            yield fn(x)
        return
    executor = pool(name)
    task = _busy(fn) if even and depth >= workers() else fn
    pending: deque[Future[R]] = deque()
    try:
        for x in items:
            pending.append(executor.submit(contextvars.copy_context().run, task, x))
            if len(pending) > depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        wait(pending)


def run_shared(
    name: str, calls: Sequence[Callable[[], None]], weights: Sequence[int], *, helping: bool = False
) -> None:
    """Make ``calls`` (the heaviest ``weights`` first) on as many threads of pool ``name`` as it
    has workers (the calling thread among them with ``helping``), each taking the next call not
    yet taken until none is left: a hand-off per thread, not per call (each costs some 25 us of
    CPU and more in contention for the GIL), while the calls still balance over the threads as
    they finish, whatever they cost (a file writer's columns: one of strings takes longer than
    more bytes of floats). Inline as :func:`map_on` would be. A failing call leaves the calls not
    yet taken to none; its error is raised once the threads are done.
    """
    queue = deque(calls[i] for i in sorted(range(len(calls)), key=lambda i: -weights[i]))

    def drain(_: int) -> None:
        while queue:
            try:
                call = queue.popleft()
            except IndexError:  # (another thread took the last one)
                return
            try:
                call()
            except BaseException:
                queue.clear()
                raise

    map_on(name, drain, range(min(workers(), len(calls))), helping=helping)


#: a map of at least this many even tasks per worker keeps the workers busy (tasks of somewhat
#: unequal size still balance out); uneven ones (a table's columns) may leave workers idle
BUSY_TASKS = 2


def start_one(name: str, call: Callable[[], R]) -> Future[R] | None:
    """Start ``call`` on pool ``name`` (in the caller's context) and return its future, for work
    that waits on a remote store while the caller does other work; None where a map on that pool
    would run inline: the caller then makes the call itself."""
    if _inline(name):
        return None
    return pool(name).submit(contextvars.copy_context().run, call)


def start_on(name: str, calls: Sequence[Callable[[], R]]) -> list[Future[R]]:
    """Start ``calls`` on pool ``name`` and return their futures at once (the caller waits on each
    when it needs its result, and :func:`settle` s them all in the end); none are started (an empty
    list) where a map on that pool would run inline, or for fewer than two calls: the caller then
    does the work itself when it needs it."""
    if len(calls) < 2 or _inline(name):
        return []
    executor = pool(name)
    return [executor.submit(call) for call in calls]


def settle(futures: Sequence[Future[Any]]) -> None:
    """Cancel the futures not yet started and wait for the running ones (their errors are the
    caller's to see through the futures, or to drop): nothing goes on in the background."""
    for f in futures:
        f.cancel()
    wait(futures)


def runs_inline(name: str) -> bool:
    """Whether a map on pool ``name`` called here would run its calls one after another on
    this thread (see :func:`map_on`)."""
    return _inline(name)


def _inline(name: str) -> bool:
    """Whether a map on pool ``name`` runs on the calling thread: it is a thread of that pool
    (which would wait on itself) or runs a task of a map that keeps every worker busy, or the
    map is of parts and the thread runs a task of a map that gives every core one, or the map
    is of CPU work and the thread works on one core (:func:`on_one_core`)."""
    return (
        getattr(_BUSY, "on", False)
        or threading.current_thread().name.startswith(name)
        or (name == PARTS and getattr(_BUSY, "filled", False))
        or (getattr(_BUSY, "one_core", False) and name not in _WAITING)
    )


#: the pools whose tasks mostly wait on a remote store: used even by a thread on one core
_WAITING = (IO, PAGE_IO, ARROW_READS)


@contextlib.contextmanager
def on_one_core() -> Iterator[None]:
    """Within it, the CPU work this thread maps (decoding pages, encoding columns) runs on the
    thread itself, one call after another; maps that wait on a remote store still use their
    pools. For a caller that is given one core while as many others keep the other cores busy
    (a Spark task: Spark runs a task per core): the pools' threads would only share that core
    with it and add hand-offs.

    Example:
        ```python
        from lance_table._parallel import DECODE, map_on, on_one_core

        with on_one_core():
            print(map_on(DECODE, lambda x: x * 2, [1, 2, 3]))  # run on this thread
        ```
    """
    before = getattr(_BUSY, "one_core", False)
    _BUSY.one_core = True
    try:
        yield
    finally:
        _BUSY.one_core = before


def _cores() -> int:
    """How many tasks keep every core busy: the cores, or the workers when there are more (each
    pool has :func:`workers` threads, so on a machine of more cores than that the threads of the
    part pool still find idle cores beside a map's workers).

    Raises:
        ValueError: ``LANCE_CPU_THREADS`` is not a positive integer.
    """
    return max(workers(), os.cpu_count() or 1)


def _filled(fn: Callable[[T], R]) -> Callable[[T], R]:
    """``fn``, marking its thread as running one of a map's tasks that give every core one at
    least (or a task of a map inside one): there is no idle core for the parts of a page, which
    are then not cut (see :func:`parts_inline`)."""
    return _marking(fn, "filled")


def _busy(fn: Callable[[T], R]) -> Callable[[T], R]:
    """``fn``, marking its thread busy while it runs (see :func:`_inline`)."""
    return _marking(fn, "on")


def _marking(fn: Callable[[T], R], flag: str) -> Callable[[T], R]:
    """``fn``, setting the thread's ``flag`` while it runs (and putting back what it was)."""

    def run(x: T) -> R:
        before = getattr(_BUSY, flag, False)
        setattr(_BUSY, flag, True)
        try:
            return fn(x)
        finally:
            setattr(_BUSY, flag, before)

    return run


def map_fragments(
    fn: Callable[[T], R], items: Iterable[T], *, even: bool = False, helping: bool = False
) -> list[R]:
    """``[fn(x) for x in items]`` on the fragment pool (``even``, ``helping``: see :func:`map_on`)."""
    return map_on(FRAGMENTS, fn, items, even=even, helping=helping)


#: :func:`map_grouped` makes this many tasks per worker out of many small items, and more only
#: to keep each task below :data:`GROUP_SIZE` (rows, say) in all.
GROUPS_PER_WORKER = 4
GROUP_SIZE = 256 * 1024


def groups(
    sizes: Sequence[int], per_worker: int = GROUPS_PER_WORKER, tasks: int | None = None
) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` groups of items of ``sizes``: ``per_worker`` groups per worker
    (or ``tasks`` groups) of about equal size in all (more when that would make groups larger than
    :data:`GROUP_SIZE`), or one item a group when there are not more items than that."""
    n = len(sizes)
    total = int(sum(sizes))
    target = max(tasks or per_worker * workers(), -(-total // GROUP_SIZE))
    if n <= target:
        return [(i, i + 1) for i in range(n)]
    ends = list(itertools.accumulate(sizes))
    cuts = [0]
    for k in range(1, target):
        at = bisect.bisect_left(ends, total * k / target) + 1
        if cuts[-1] < at < n:
            cuts.append(at)
    cuts.append(n)
    return list(itertools.pairwise(cuts))


def map_grouped(
    fn: Callable[[T], R], items: Iterable[T], sizes: Sequence[int], *, in_flight: int = 0
) -> list[R]:
    """``[fn(x) for x in items]`` on the fragment pool, in tasks of contiguous items (see
    :func:`groups`; ``sizes``: what each item weighs): a task per tiny fragment would cost more in
    hand-offs than its work, while the groups still keep every worker busy to the end.

    ``in_flight``: how many of the calls are worth running at once because their time goes into
    waiting on a remote store (see ``Storage.read_parallelism``). When that is more than the
    workers, the calls run on the :data:`IO` pool in as many tasks (at most :data:`IO_THREADS`
    at a time), so that a scan of many small remote files waits for many requests at once.
    """
    items = list(items)
    name, tasks = FRAGMENTS, None
    if in_flight > workers() and len(items) > 1 and not _inline(FRAGMENTS) and not _inline(IO):
        name, tasks = IO, min(in_flight, io_threads())
    spans = groups(sizes, tasks=tasks)
    if len(spans) == len(items):
        return map_on(name, fn, items, even=True)
    parts = map_on(name, lambda span: [fn(x) for x in items[span[0] : span[1]]], spans, even=True)
    return [r for part in parts for r in part]


#: :func:`map_groups` makes at most this many groups per worker, of at least BATCH_ITEMS items
BATCH_GROUPS_PER_WORKER = 2
BATCH_ITEMS = 32


def map_groups(
    fn: Callable[[list[T]], list[R]], items: Iterable[T], sizes: Sequence[int], *, in_flight: int = 0
) -> list[R]:
    """:func:`map_grouped`, but ``fn`` takes a whole group of contiguous items (see :func:`groups`)
    and returns a list of results for it (any number): work on many tiny items done as one
    (a batch read of many small fragments). The groups' lists are joined in order."""
    items = list(items)
    if not items:
        return []
    # Fewer, larger groups than map_grouped makes: the work per item here is mostly Python (it
    # holds the GIL), so more groups would not run faster on more cores, and each group has a
    # fixed cost of its own; each group keeps at least BATCH_ITEMS items when there are enough.
    name, tasks = FRAGMENTS, max(1, min(BATCH_GROUPS_PER_WORKER * workers(), len(items) // BATCH_ITEMS))
    if in_flight > workers() and len(items) > 1 and not _inline(FRAGMENTS) and not _inline(IO):
        name, tasks = IO, min(in_flight, io_threads())
    spans = groups(sizes, tasks=tasks)
    parts = map_on(name, lambda span: fn(items[span[0] : span[1]]), spans, even=True)
    return [r for part in parts for r in part]


def parts_inline() -> bool:
    """Whether :func:`map_parts` called here would run on the calling thread: then cutting work
    into parts only adds the cost of joining them."""
    return _inline(PARTS)


def map_parts(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]`` on the pool for pieces of one page: leaf work such as decoding
    one part of a large page, which must not itself wait on that pool."""
    return map_on(PARTS, fn, items)


class cached_per_instance(Generic[R]):
    """``functools.cached_property`` without its lock.

    Before Python 3.12, ``cached_property`` holds one lock per class attribute while it computes:
    the first reads of a property of many instances run one after another even on different
    threads (a scan opening the files of hundreds of fragments at once would wait on each file in
    turn). Here two threads asking the same instance at once may both compute the value (it must
    not matter which one is kept); other instances never wait.
    """

    def __init__(self, fn: Callable[[Any], R]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> cached_per_instance[R]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> R: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> R | cached_per_instance[R]:
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.name] = value  # found before this (non-data) descriptor from now on
        return value
