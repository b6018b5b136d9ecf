"""The thread pools' helpers: results in order, no work left running after a stop or a failure."""

from __future__ import annotations

import threading
import time

import pytest

from lance_table import _parallel
from lance_table._parallel import ENCODE, FRAGMENTS, ahead_on, map_fragments, run_shared


def test_ahead_keeps_order_and_runs_ahead_on_the_pool() -> None:
    threads: set[str] = set()

    def slow(x: int) -> int:
        threads.add(threading.current_thread().name)
        time.sleep(0.002 * (x % 3))  # later items finish first now and then
        return x * x

    assert list(ahead_on(FRAGMENTS, slow, range(40), depth=3)) == [x * x for x in range(40)]
    assert threads and all(name.startswith(FRAGMENTS) for name in threads)


def test_ahead_draws_items_lazily_and_stops_when_the_consumer_stops() -> None:
    drawn: list[int] = []
    done: list[int] = []

    def items():  # type: ignore[no-untyped-def]
        for x in range(1000):
            drawn.append(x)
            yield x

    def work(x: int) -> int:
        time.sleep(0.001)
        done.append(x)
        return x

    gen = ahead_on(FRAGMENTS, work, items(), depth=2)
    assert [next(gen) for _ in range(3)] == [0, 1, 2]
    gen.close()
    settled = len(done)
    time.sleep(0.05)
    assert len(done) == settled <= 6  # nothing ran on after the stop
    assert len(drawn) <= 6


def test_ahead_raises_the_first_failure_and_cancels_the_rest() -> None:
    done: list[int] = []

    def work(x: int) -> int:
        if x == 5:
            raise ValueError("bad item")
        time.sleep(0.001)
        done.append(x)
        return x

    got = []
    with pytest.raises(ValueError, match="bad item"):
        for y in ahead_on(FRAGMENTS, work, range(200), depth=2):
            got.append(y)
    assert got == [0, 1, 2, 3, 4]
    settled = len(done)
    time.sleep(0.05)
    assert len(done) == settled <= 10


def test_ahead_runs_inline_without_depth_or_on_its_own_pool() -> None:
    me = threading.current_thread().name
    assert list(ahead_on(FRAGMENTS, lambda x: threading.current_thread().name, range(3), depth=0)) == [me] * 3
    # from inside a task of the pool it would wait on itself: it runs inline there
    inner = map_fragments(
        lambda _: list(ahead_on(FRAGMENTS, lambda x: threading.current_thread().name, range(3), depth=4)),
        range(2),
    )
    assert all(len(set(names)) == 1 and names[0].startswith(FRAGMENTS) for names in inner)
    assert _parallel.workers() >= 1


def _where_inner_maps_run(x: int) -> tuple[str, set[str], set[str]]:
    """The thread of an outer task, and those of the maps it runs on the parts and decode pools."""

    def inner(y: int) -> str:
        return threading.current_thread().name

    parts = set(_parallel.map_parts(inner, range(4)))
    decode = set(ahead_on(_parallel.DECODE, inner, range(4), 2))
    return threading.current_thread().name, parts, decode


def test_maps_inside_a_map_that_keeps_every_worker_busy_run_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "workers", lambda: 2)
    monkeypatch.setattr(_parallel.os, "cpu_count", lambda: 2)
    busy = _parallel.BUSY_TASKS * 2
    # busy, then a task per worker (no idle worker for parts), then too few or uneven tasks (the
    # same pool threads: the marks do not outlive the tasks), then busy again
    for tasks, even in ((busy, True), (busy - 1, True), (2, True), (busy, False), (busy, True)):
        for here, parts, decode in map_fragments(_where_inner_maps_run, range(tasks), even=even):
            assert here.startswith(FRAGMENTS)
            if tasks >= busy and even:  # on the outer task's own thread
                assert parts == decode == {here}
                continue
            assert all(name.startswith(_parallel.DECODE) for name in decode)
            if even:  # every worker has a task: a page is not cut into parts
                assert parts == {here}
            else:
                assert all(name.startswith(_parallel.PARTS) for name in parts)


def _parts_inside(x: int) -> tuple[str, set[str]]:
    """The thread of a task, and those of a map on the parts pool inside it."""
    names = _parallel.map_parts(lambda y: threading.current_thread().name, range(4))
    return threading.current_thread().name, set(names)


def test_parts_are_not_cut_inside_maps_inside_a_map_that_fills_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_parallel, "workers", lambda: 2)
    monkeypatch.setattr(_parallel.os, "cpu_count", lambda: 2)

    # a task per worker, each mapping its columns on the decode pool: their pages are not cut
    def columns(_: int) -> list[tuple[str, set[str]]]:
        return _parallel.map_on(_parallel.DECODE, _parts_inside, range(3))

    outer = map_fragments(columns, range(2), even=True)
    assert all(names == {here} and here.startswith(_parallel.DECODE) for got in outer for here, names in got)
    # fewer tasks than workers: the workers left idle take the parts
    outer = map_fragments(columns, range(1))
    assert all(all(n.startswith(_parallel.PARTS) for n in names) for got in outer for _, names in got)
    # a task per worker on a machine of more cores: the idle cores take the parts
    monkeypatch.setattr(_parallel.os, "cpu_count", lambda: 16)
    outer = map_fragments(columns, range(2), even=True)
    assert all(all(n.startswith(_parallel.PARTS) for n in names) for got in outer for _, names in got)


def test_streamed_maps_that_keep_every_worker_busy_mark_their_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "workers", lambda: 2)
    for here, parts, decode in ahead_on(FRAGMENTS, _where_inner_maps_run, range(6), depth=2, even=True):
        assert parts | decode == {here}
    for depth, even in ((1, True), (2, False)):
        for here, parts, decode in ahead_on(
            FRAGMENTS, _where_inner_maps_run, range(6), depth=depth, even=even
        ):
            assert here not in parts | decode


@pytest.mark.parametrize("threads", [2, 16])
def test_many_small_items_are_grouped_into_a_few_tasks_per_worker(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    monkeypatch.setattr(_parallel, "workers", lambda: threads)
    target = _parallel.GROUPS_PER_WORKER * threads
    assert _parallel.groups([100] * 5) == [(i, i + 1) for i in range(5)]
    for sizes in ([100] * 5000, [1, 1000, 5, 70000] * 300, [10**6] * 40):
        spans = _parallel.groups(sizes)
        assert [s for s, _ in spans] == [0] + [e for _, e in spans[:-1]] and spans[-1][1] == len(sizes)
        assert all(e > s for s, e in spans)
        weights = [sum(sizes[s:e]) for s, e in spans]
        if sum(sizes) <= target * _parallel.GROUP_SIZE:
            assert len(spans) == min(target, len(sizes))
        assert max(weights) <= 2 * sum(sizes) / len(spans) + max(sizes)
    seen: list[str] = []

    def square(x: int) -> int:
        seen.append(threading.current_thread().name)
        return x * x

    assert _parallel.map_grouped(square, range(3000), [1] * 3000) == [x * x for x in range(3000)]
    assert len(seen) == 3000


def test_cached_per_instance_computes_instances_at_the_same_time() -> None:
    """functools.cached_property (before 3.12) computes one instance at a time: here the first
    instance's computation waits for the second's, which must not wait for it."""
    from lance_table._parallel import cached_per_instance

    second_started = threading.Event()

    class Item:
        def __init__(self, k: int) -> None:
            self.k = k
            self.calls = 0

        @cached_per_instance
        def value(self) -> int:
            self.calls += 1
            if self.k == 0:
                assert second_started.wait(5), "the other instance's computation was held back"
            else:
                second_started.set()
            return self.k * 10

    items = [Item(0), Item(1)]
    first = threading.Thread(target=lambda: items[0].value)
    first.start()
    time.sleep(0.01)
    assert items[1].value == 10
    first.join()
    assert items[0].value == 0 and items[0].calls == 1 and items[1].calls == 1


def test_on_one_core_runs_cpu_maps_on_the_calling_thread_and_waits_on_the_io_pools() -> None:
    me = threading.current_thread().name

    def name(_: int) -> str:
        time.sleep(0.001)
        return threading.current_thread().name

    with _parallel.on_one_core():
        for cpu in (_parallel.DECODE, _parallel.PARTS, FRAGMENTS, _parallel.ENCODE):
            assert set(_parallel.map_on(cpu, name, range(4))) == {me}
        assert _parallel.start_one(_parallel.DECODE, lambda: 1) is None  # the caller does it
        with _parallel.on_one_core():  # nested: still on one core after the inner one ends
            pass
        assert _parallel.runs_inline(_parallel.DECODE)
        io = set(_parallel.map_on(_parallel.IO, name, range(4)))
        assert io and all(n.startswith(_parallel.IO) for n in io)
    assert not _parallel.runs_inline(_parallel.DECODE)
    decode = set(_parallel.map_on(_parallel.DECODE, name, range(4)))
    assert decode and all(n.startswith(_parallel.DECODE) for n in decode)


def test_shared_calls_are_each_made_once_and_a_failure_stops_the_rest(monkeypatch):
    monkeypatch.setenv("LANCE_CPU_THREADS", "2")
    made: list[int] = []
    threads: set[str] = set()

    took = {True: threading.Event(), False: threading.Event()}  # by whether on this thread

    def call(i: int):  # type: ignore[no-untyped-def]
        def run() -> None:
            here = threading.current_thread() is threading.main_thread()
            took[here].set()
            took[not here].wait(5)  # (each waits until the other thread has taken one too)
            made.append(i)
            threads.add(threading.current_thread().name)

        return run

    run_shared(ENCODE, [call(i) for i in range(40)], list(range(40)), helping=True)
    assert sorted(made) == list(range(40))
    assert took[True].is_set() and len(threads) == 2  # this thread takes a share, as the pool's

    def fail() -> None:
        raise ValueError("bad column")

    def slow(i: int):  # type: ignore[no-untyped-def]
        def run() -> None:
            time.sleep(0.002)
            made.append(i)

        return run

    made.clear()
    with pytest.raises(ValueError, match="bad column"):
        run_shared(ENCODE, [slow(i) for i in range(40)] + [fail], [1] * 40 + [100])  # the failing one first
    assert len(made) < 40
