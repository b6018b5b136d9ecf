"""Runs of the positions of many owners made in one pass (a take touching many small
fragments): the same runs as each owner's positions made into runs on their own."""

from __future__ import annotations

import numpy as np

from lance_table.file.runs import EMPTY, Runs


def test_runs_by_owner_equal_each_owners_runs() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        owner = np.sort(rng.integers(0, 12, rng.integers(0, 60)))
        positions = rng.integers(0, 40, owner.size)
        key = np.unique((owner << 32) | positions)  # sorted by owner, then position; no duplicates
        owner, positions = key >> 32, key & 0xFFFFFFFF
        owners = sorted(set(rng.integers(0, 14, 6).tolist()) | set(owner.tolist()))
        got = Runs.by_owner(owner, positions, owners)
        for k, runs in zip(owners, got):
            want = Runs.from_sorted_unique(positions[owner == k])
            assert runs.starts.tolist() == want.starts.tolist()
            assert runs.lengths.tolist() == want.lengths.tolist()
            assert (runs is EMPTY) == (want is EMPTY)


def test_runs_of_neighbouring_owners_do_not_join() -> None:
    # the last position of one owner and the first of the next are consecutive numbers
    owner = np.array([0, 0, 1, 1, 3], np.int64)
    positions = np.array([4, 5, 6, 7, 8], np.int64)
    got = Runs.by_owner(owner, positions, [0, 1, 2, 3])
    assert [(r.starts.tolist(), r.lengths.tolist()) for r in got] == [
        ([4], [2]),
        ([6], [2]),
        ([], []),
        ([8], [1]),
    ]
