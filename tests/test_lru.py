"""The bounded LRU map every cache of lance_table is built on: its bounds, its order, its weights,
and its consistency when threads share it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from lance_table._lru import LRU


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: LRU[str, int] = LRU(3)
    for i, key in enumerate("abc"):
        assert cache.put(key, i)
    assert cache.get("a") == 0  # a read makes "a" the most recently used
    cache.put("d", 3)
    assert list(cache) == ["c", "a", "d"] and "b" not in cache
    cache.put("c", 30)  # a put of a kept key replaces it, as the most recently used
    cache.put("e", 4)
    assert list(cache) == ["d", "c", "e"]
    assert cache["c"] == 30 and list(cache) == ["d", "c", "e"]  # [] does not mark it used
    assert cache.values() == [3, 30, 4]
    assert cache.get("zz") is None and cache.get("zz", -1) == -1
    with pytest.raises(KeyError):
        cache["zz"]
    assert cache.pop("d") == 3 and cache.pop("d") is None and len(cache) == 2
    cache.clear()
    assert len(cache) == 0 and list(cache) == []


def test_many_keys_at_once() -> None:
    cache: LRU[int, str] = LRU(4)
    cache.put_many((i, str(i)) for i in range(6))
    assert list(cache) == [2, 3, 4, 5]
    assert cache.get_many([5, 9, 2]) == ["5", None, "2"]
    assert list(cache) == [3, 4, 5, 2]  # the hits are the most recently used, in the order read
    empty: LRU[int, int] = LRU(0)
    empty.put(1, 1)
    assert len(empty) == 0


def test_weights_bound_the_total() -> None:
    cache: LRU[str, bytes] = LRU(100, max_bytes=10)
    assert cache.put("a", b"", weight=4) and cache.put("b", b"", weight=4)
    assert cache.nbytes == 8
    cache.put("c", b"", weight=4)  # 12 > 10: the oldest goes
    assert list(cache) == ["b", "c"] and cache.nbytes == 8
    cache.put("b", b"", weight=1)  # replacing counts the new weight only
    assert cache.nbytes == 5 and list(cache) == ["c", "b"]
    assert not cache.put("huge", b"", weight=11)  # heavier than the bound alone: not kept
    assert list(cache) == ["c", "b"] and cache.nbytes == 5
    assert cache.pop("c") == b"" and cache.nbytes == 1
    cache.clear()
    assert cache.nbytes == 0
    with pytest.raises(ValueError, match="negative"):
        LRU(-1)


def test_threads_sharing_a_cache_keep_it_consistent() -> None:
    cache: LRU[int, int] = LRU(50, max_bytes=400)
    start = threading.Barrier(4)
    errors: list[str] = []

    def work(seed: int) -> None:
        start.wait()
        for i in range(3000):
            key = (i * 7 + seed * 13) % 120
            if i % 3 == 0:
                got = cache.get_many([key, key + 1])
                if any(v is not None and v != k * 2 for k, v in zip([key, key + 1], got)):
                    errors.append(f"wrong value near {key}")
            elif i % 5 == 0:
                cache.pop(key)
            else:
                cache.put(key, key * 2, weight=key % 16)
            value = cache.get(key)
            if value is not None and value != key * 2:
                errors.append(f"wrong value for {key}")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    kept = list(cache)
    assert len(kept) == len(set(kept)) <= 50
    assert cache.nbytes == sum(k % 16 for k in kept) <= 400
    assert all(cache[k] == k * 2 for k in kept)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_free_lock() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    with cache.lock:  # held by the parent at the fork, as a busy thread may
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a child stuck on the inherited lock dies rather than hang the test
            code = 0 if cache.get("a") == 1 and cache.put("b", 2) else 1
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_setdefault_keeps_one_value_per_key() -> None:
    cache: LRU[str, list[int]] = LRU(2)
    first = cache.setdefault("a", [1])
    assert cache.setdefault("a", [2]) is first
    cache.put("b", [3])
    cache.setdefault("a", [4])  # a hit marks "a" used
    cache.put("c", [5])
    assert list(cache) == ["a", "c"]


def test_the_encoding_cache_keeps_hot_encodings_past_its_bound() -> None:
    """A workload just over a cache's bound: the encodings of every file of a dataset (hot) read
    between one-off ones of many other files. A cache cleared when full parsed the hot ones again
    after every clear; the LRU keeps them (the same parsed message is served throughout)."""
    from lance_table._proto import encodings_v2_0_pb2, file2_pb2
    from lance_table.file import container
    from lance_table.storage.sources import BytesSource

    def encoding(bits: int) -> file2_pb2.Encoding:
        msg = encodings_v2_0_pb2.ArrayEncoding()
        msg.flat.bits_per_value = bits
        enc = file2_pb2.Encoding()
        container.pack_encoding(msg, container.URL_ARRAY_ENCODING, enc)
        return enc

    source = BytesSource(b"", "hot.lance")
    hot = [encoding(1 << 20 | i) for i in range(8)]
    parsed = [container.unpack_encoding(e, source, "a page")[1] for e in hot]
    for i in range(container._ENCODINGS.size + 100):
        container.unpack_encoding(encoding(1 << 21 | i), source, "a page")
        if i % 64 == 0:
            again = [container.unpack_encoding(e, source, "a page")[1] for e in hot]
            assert all(a is b for a, b in zip(again, parsed)), i
    assert len(container._ENCODINGS) == container._ENCODINGS.size
