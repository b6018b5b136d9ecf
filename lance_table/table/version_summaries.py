"""What ``versions()`` shows of each version, at a cost that does not grow with the history.

Two things keep a long history cheap:

* **A bounded, process-wide cache of each manifest file's summary**, keyed by the storage, the
  file's path and what the listing says of its content: the ETag where the store gives one (a
  digest of the bytes), else the size and the modification time. A time is trusted only once it is
  old enough that a rewrite of the same path could not get the same one (file systems stamp times
  from a coarse clock), so a path that is rewritten, by a dataset dropped and created again, never
  answers with the old file's summary. A second ``versions()`` and one after another commit read
  only the manifests they have not seen.
* **Fragment totals computed from the difference to the previous manifest.** Consecutive versions
  share almost all their fragments, byte for byte, in the same order: an append adds one at the
  end, a delete rewrites one in the middle. The fragments of a manifest are found as a run of
  protobuf records; the run is compared with the previous version's (``memcmp``), and only the
  records that differ are parsed. The counts of the others are carried over in numpy arrays. When
  the records are not laid out as expected (another writer's encoding), the totals are computed
  fragment by fragment instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from lance_table._lru import LRU
from lance_table._proto import table_pb2
from lance_table.storage import Storage
from lance_table.storage.base import Entry

#: summaries kept, all datasets together (a few hundred bytes each)
SUMMARY_CACHE_SIZE = 100_000
#: how old a modification time must be before it identifies a file's content: file systems stamp
#: times from a clock that ticks every few milliseconds, or every second or two on some
_FINE_CLOCK_MARGIN = 0.05
_COARSE_CLOCK_MARGIN = 2.5

_SUMMARIES: LRU[tuple[Any, ...], dict[str, Any]] = LRU(SUMMARY_CACHE_SIZE)


def clear() -> None:
    """Forget every cached summary and fragment run (for benchmarks that time a first call)."""
    _SUMMARIES.clear()
    _LAST.clear()
    _SHOWN.clear()


#: the summaries ``versions()`` last showed of a dataset (by storage cache key), with the object
#: that listed its manifest files
_SHOWN: LRU[str, tuple[object, list[dict[str, Any]]]] = LRU(16)


def shown(dataset_key: str, listed: object) -> list[dict[str, Any]] | None:
    """Fresh copies of the summaries last shown of the dataset, if they were shown of the very
    same ``listed`` object: a listing that a storage gives again only while its directory is
    provably unchanged (see ``Storage.list_created_files``), each file's content identified."""
    hit = _SHOWN.get(dataset_key)
    if hit is None or hit[0] is not listed:
        return None
    return [fresh(s) for s in hit[1]]


def show(dataset_key: str, listed: object, summaries: list[dict[str, Any]]) -> None:
    """Keep (copies of) the ``summaries`` shown of every manifest file ``listed``."""
    _SHOWN.put(dataset_key, (listed, [fresh(s) for s in summaries]))


def summary_key(storage: Storage, entry: Entry, now: float | None = None) -> tuple[Any, ...] | None:
    """The key under which a listed manifest file's summary may be cached; None when what the
    listing says does not identify the file's content (no ETag, no time, or a time too recent)."""
    etag = getattr(entry, "etag", None)
    if etag:
        return (storage.cache_key, entry.path, entry.size, "etag", etag)
    if entry.modified is None or entry.size < 0:
        return None
    coarse = float(entry.modified).is_integer()
    margin = _COARSE_CLOCK_MARGIN if coarse else _FINE_CLOCK_MARGIN
    if (time.time() if now is None else now) - entry.modified < margin:
        return None
    return (storage.cache_key, entry.path, entry.size, "mtime", entry.modified)


def cached(key: tuple[Any, ...] | None) -> dict[str, Any] | None:
    """A cached summary (a fresh copy the caller may change), or None."""
    if key is None:
        return None
    hit = _SUMMARIES.get(key)
    return None if hit is None else fresh(hit)


def remember(key: tuple[Any, ...] | None, summary: dict[str, Any]) -> None:
    """Cache a summary under ``key`` (nothing when the key is None)."""
    if key is None:
        return
    _SUMMARIES.put(key, fresh(summary))


def fresh(summary: dict[str, Any]) -> dict[str, Any]:
    """A copy of a summary that shares no dictionary with it (a caller may change either)."""
    out = dict(summary)
    out["metadata"] = dict(summary["metadata"])
    out["transaction_properties"] = dict(summary["transaction_properties"])
    return out


# ---------------------------------------------------------------------------------------------
# fragment totals by difference

_FRAGMENT_TAG = 0x12  # Manifest.fragments: field 2, length-delimited
_ALIGN_TRIES = 8  # records parsed past a difference while still looking for shared ones


@dataclass
class _Run:
    """The fragment records of one manifest: their bytes, where each starts (and, last, where the
    run ends), and each one's counts (rows, data files, deleted rows, deletion files, bytes)."""

    data: bytes  # the whole manifest protobuf
    bounds: np.ndarray  # int64, len = records + 1, offsets into ``data``
    counts: np.ndarray  # int64, shape (records, 5)
    start: int  # where the run starts in ``data`` (its end is ``bounds[-1]``)


# The last run seen per dataset: what the next version is compared with (bounded).
_LAST_SIZE = 16
_LAST: LRU[str, _Run] = LRU(_LAST_SIZE)


@dataclass(frozen=True)
class FragmentRun:
    """The fragment records of a manifest protobuf, found by :func:`find_fragment_run`: the span
    ``(start, end)`` of the body they fill, and the version summary they make (pylance's
    ``metadata``)."""

    span: tuple[int, int]
    totals: dict[str, str]
    _run: _Run = field(repr=False)


def find_fragment_run(dataset_key: str, body: bytes) -> FragmentRun | None:
    """The fragment records of a manifest protobuf ``body``, as one run of consecutive records,
    their counts found from the difference to the last manifest of the same dataset seen here (see
    the module's docstring); None when the body does not parse as expected.

    The caller checks that no fragment record lies outside the run (by parsing the rest of the
    body), then :func:`keep` s it as the one the dataset's next version is compared with.
    """
    prev = _LAST.get(dataset_key)
    run = _run_of(body, prev)
    if run is None:
        return None
    rows, files, deleted, deletion_files, size = (int(x) for x in run.counts.sum(axis=0))
    totals = {
        "total_data_file_rows": str(rows),
        "total_data_files": str(files),
        "total_deletion_file_rows": str(deleted),
        "total_deletion_files": str(deletion_files),
        "total_files_size": str(size),
        "total_fragments": str(len(run.counts)),
        "total_rows": str(rows - deleted),
    }
    return FragmentRun((run.start, int(run.bounds[-1])), totals, run)


def keep(dataset_key: str, run: FragmentRun) -> None:
    """Remember ``run`` as the dataset's last: its next version is compared with it."""
    _LAST.put(dataset_key, run._run)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _skip(data: bytes, pos: int) -> int:
    """Where the protobuf record at ``pos`` ends."""
    tag, pos = _varint(data, pos)
    kind = tag & 7
    if kind == 0:
        return _varint(data, pos)[1]
    if kind == 1:
        return pos + 8
    if kind == 2:
        length, pos = _varint(data, pos)
        return pos + length
    if kind == 5:
        return pos + 4
    raise ValueError(f"wire type {kind}")


def _run_of(body: bytes, prev: _Run | None) -> _Run | None:
    """The fragment records of ``body`` (a run of consecutive records, wherever it is), or None when
    the body does not parse as expected. The caller checks that the run holds every fragment.

    Records equal to ``prev``'s are found by comparing bytes at a few alignments (a record of
    ``prev`` kept, replaced, removed or one added before it); only the others are parsed. The
    fields before the fragments (the schema) are skipped at once when they are ``prev``'s.
    """
    try:
        size = len(body)
        # the fields before the fragments (the schema) are skipped at once when they are prev's
        same = prev is not None and body.startswith(memoryview(prev.data)[: prev.start])
        pos = prev.start if same and prev is not None else 0
        while pos < size and body[pos] != _FRAGMENT_TAG:  # the fields before the fragments
            pos = _skip(body, pos)
        if pos > size:
            return None
        bounds: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        fresh: list[int] = []  # starts of the records parsed here, not yet added
        n = len(prev.counts) if prev is not None else 0
        k = walked = 0  # prev's records matched so far; records parsed since
        q = pos  # where we are
        while q < size and body[q] == _FRAGMENT_TAG:
            if prev is not None and k < n and walked <= _ALIGN_TRIES:
                step = _match(body, q, prev, k, walked)
                if step is not None:
                    j, m = step  # body[q:...] holds prev's records j..m-1
                    _flush(body, fresh, q, bounds, counts)
                    fresh = []
                    start = int(prev.bounds[j])
                    bounds.append(prev.bounds[j:m] + (q - start))
                    counts.append(prev.counts[j:m])
                    q += int(prev.bounds[m]) - start
                    k, walked = m, 0
                    continue
            fresh.append(q)
            walked += 1
            length, p = _varint(body, q + 1)
            q = p + length
            if q > size:
                return None
        _flush(body, fresh, q, bounds, counts)
        bounds.append(np.array([q], dtype=np.int64))
        all_counts = np.concatenate(counts) if counts else np.zeros((0, 5), dtype=np.int64)
        return _Run(body, np.concatenate(bounds), all_counts.reshape(-1, 5), pos)
    except (IndexError, ValueError):
        return None


def _match(run: bytes, q: int, prev: _Run, k: int, walked: int) -> tuple[int, int] | None:
    """``(j, m)`` when ``run`` holds, from ``q`` on, ``prev``'s whole records ``j`` to ``m - 1``
    (at least one), trying ``j`` as the record kept or replaced, after one removed, after one added."""
    n = len(prev.counts)
    for j in (k + walked, k + walked + 1, k + walked - 1):
        if k <= j < n:
            start = int(prev.bounds[j])
            shared = _common_prefix(run, q, prev.data, start)
            m = int(np.searchsorted(prev.bounds, start + shared, side="right")) - 1
            if m > j:
                return j, m
    return None


def _flush(
    run: bytes, starts: list[int], end: int, bounds: list[np.ndarray], counts: list[np.ndarray]
) -> None:
    """Parse the records starting at ``starts`` (the last ends at ``end``) and add them."""
    if not starts:
        return
    edges = [*starts, end]
    rows = []
    for a, b in pairwise(edges):
        length, p = _varint(run, a + 1)
        if p + length != b:
            raise ValueError("records do not follow each other")
        frag = table_pb2.DataFragment()
        frag.ParseFromString(run[p:b])
        deleted = frag.deletion_file.num_deleted_rows if frag.HasField("deletion_file") else 0
        rows.append(
            (
                frag.physical_rows,
                len(frag.files),
                deleted,
                int(frag.HasField("deletion_file")),
                sum(d.file_size_bytes for d in frag.files),
            )
        )
    bounds.append(np.asarray(starts, dtype=np.int64))
    counts.append(np.asarray(rows, dtype=np.int64).reshape(-1, 5))


def _common_prefix(a: bytes, qa: int, b: bytes, qb: int) -> int:
    """How many bytes ``a[qa:]`` and ``b[qb:]`` share at their starts: compared in growing chunks,
    so a difference near the start costs little."""
    n = min(len(a) - qa, len(b) - qb)
    view = memoryview(b)
    done, chunk = 0, 64
    while done < n:
        size = min(chunk, n - done)
        if a.startswith(view[qb + done : qb + done + size], qa + done):
            done += size
            chunk *= 4
            continue
        x = np.frombuffer(a, dtype=np.uint8, count=size, offset=qa + done)
        y = np.frombuffer(b, dtype=np.uint8, count=size, offset=qb + done)
        return done + int(np.argmax(x != y))
    return n
