"""The thread pools' helpers: results in order, no work left running after a stop or a failure."""

from __future__ import annotations

import threading
import time

import pytest

from lance_table import _parallel
from lance_table._parallel import FRAGMENTS, ahead_on, map_fragments


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


def _where_inner_maps_run(x: int) -> tuple[str, set[str]]:
    """The thread of an outer task, and those of the maps it runs on the parts and decode pools."""

    def inner(y: int) -> str:
        return threading.current_thread().name

    names = set(_parallel.map_parts(inner, range(4))) | set(ahead_on(_parallel.DECODE, inner, range(4), 2))
    return threading.current_thread().name, names


def test_maps_inside_a_map_that_keeps_every_worker_busy_run_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "workers", lambda: 2)
    busy = _parallel.BUSY_TASKS * 2
    # busy, then not (too few tasks, or uneven ones: the same pool threads, the mark does not
    # outlive the tasks), then busy again
    for tasks, even in ((busy, True), (busy - 1, True), (busy, False), (busy, True)):
        for here, names in map_fragments(_where_inner_maps_run, range(tasks), even=even):
            assert here.startswith(FRAGMENTS)
            if tasks >= busy and even:  # on the outer task's own thread
                assert names == {here}
            else:  # on the inner pools
                assert all(name.startswith((_parallel.PARTS, _parallel.DECODE)) for name in names)


def test_streamed_maps_that_keep_every_worker_busy_mark_their_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "workers", lambda: 2)
    for here, names in ahead_on(FRAGMENTS, _where_inner_maps_run, range(6), depth=2, even=True):
        assert names == {here}
    for depth, even in ((1, True), (2, False)):
        for here, names in ahead_on(FRAGMENTS, _where_inner_maps_run, range(6), depth=depth, even=even):
            assert here not in names


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


def test_once_properties_of_different_objects_are_computed_at_the_same_time() -> None:
    """``once`` keeps no lock: two threads computing the property of two objects (reading two
    fragments' deletions, say) do not wait on each other, as with functools.cached_property on
    Python 3.11, whose one lock per property serializes them."""
    both = threading.Barrier(2, timeout=5)

    class Thing:
        def __init__(self, n: int) -> None:
            self.n = n
            self.calls = 0

        @_parallel.once
        def value(self) -> int:
            """Needs the other thread inside at the same time."""
            self.calls += 1
            both.wait()
            return self.n * 10

    things = [Thing(1), Thing(2)]
    results: list[int] = []
    workers = [threading.Thread(target=lambda t=t: results.append(t.value)) for t in things]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(results) == [10, 20]
    both.reset()
    both.abort()  # from now on a second computation would fail
    assert [t.value for t in things] == [10, 20] and [t.calls for t in things] == [1, 1]
    assert Thing.value.__doc__ == "Needs the other thread inside at the same time."
