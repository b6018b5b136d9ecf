"""Compaction as pylance does it: plan bins of small fragments, reserve fragment ids, then Rewrite."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from lance_table._parallel import map_fragments
from lance_table.errors import UnsupportedFormatError
from lance_table.file.runs import Runs
from lance_table.format import paths
from lance_table.format.manifest import Fragment
from lance_table.format.transaction import ReserveFragments, Rewrite, RewriteGroup
from lance_table.table.commit import check_rebasable, commit
from lance_table.table.conflicts import Pending
from lance_table.table.fragment import FragmentReader
from lance_table.table.writer import DEFAULT_MAX_BYTES_PER_FILE, FragmentWriter

if TYPE_CHECKING:
    from lance_table.table.dataset import Dataset

DEFAULT_TARGET_ROWS = 1024 * 1024
COPY_CHUNK_ROWS = 128 * 1024


@dataclass
class _Bin:
    fragments: list[FragmentReader] = field(default_factory=list)
    compact_itself: list[bool] = field(default_factory=list)

    @property
    def live_rows(self) -> list[int]:
        return [f.fragment.num_rows for f in self.fragments]

    def is_noop(self) -> bool:
        return not self.fragments or (len(self.fragments) == 1 and not self.compact_itself[0])

    def split(self, target: int) -> list[_Bin]:
        """Split into bins of at least ``target`` rows; the remainder joins the last bin."""
        out = []
        rest = self
        while True:
            counts = rest.live_rows
            n = 0
            rows = 0
            while rows < target and n < len(counts):
                rows += counts[n]
                n += 1
            if sum(counts[n:]) >= target:
                out.append(_Bin(rest.fragments[:n], rest.compact_itself[:n]))
                rest = _Bin(rest.fragments[n:], rest.compact_itself[n:])
            else:
                out.append(rest)
                return out


def plan(
    frags: list[FragmentReader], target_rows: int, materialize_deletions: bool, threshold: float
) -> list[_Bin]:
    """Group adjacent fragments to rewrite, the way pylance's planner does."""
    bins: list[_Bin] = []
    current: _Bin | None = None
    for frag in frags:
        f = frag.fragment
        deleted_share = f.num_deleted / f.physical_rows if f.physical_rows else 0.0
        if materialize_deletions and deleted_share > threshold:
            candidacy: bool | None = True  # compact itself
        elif f.physical_rows < target_rows:
            candidacy = False  # compact with neighbours
        else:
            candidacy = None
        if candidacy is None:
            if current is not None:
                bins.append(current)
                current = None
            continue
        if current is None:
            current = _Bin()
        current.fragments.append(frag)
        current.compact_itself.append(candidacy)
    if current is not None:
        bins.append(current)
    return [b for bin_ in bins if not bin_.is_noop() for b in bin_.split(target_rows)]


def _rewrite_bin(ds: Dataset, bin_: _Bin, max_bytes: int) -> list[Fragment]:
    # Like pylance, each bin becomes one fragment (unless it passes the byte limit).
    writer = FragmentWriter(
        ds._storage,
        ds.schema,
        list(ds.manifest.fields),
        max_rows_per_file=2**62,
        max_bytes_per_file=max_bytes,
    )
    try:
        for frag in bin_.fragments:
            for lo in range(0, frag.physical_rows, COPY_CHUNK_ROWS):
                runs: Runs = frag.live_runs(lo, min(lo + COPY_CHUNK_ROWS, frag.physical_rows))
                if runs.total:
                    for batch in frag.read(ds.schema.names, runs).to_batches():
                        writer.write(batch)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def _try(fn: Callable[[], list[Fragment]]) -> tuple[list[Fragment], BaseException | None]:
    try:
        return fn(), None
    except Exception as exc:
        return [], exc


def compact_files(
    ds: Dataset,
    *,
    target_rows_per_fragment: int = DEFAULT_TARGET_ROWS,
    max_rows_per_group: int = 1024,
    materialize_deletions: bool = True,
    materialize_deletions_threshold: float = 0.1,
    max_bytes_per_file: int | None = None,
    num_threads: int | None = None,
    batch_size: int | None = None,
) -> Dataset:
    """Rewrite small fragments into fragments of about ``target_rows_per_fragment`` rows, dropping
    deleted rows; commits ``ReserveFragments`` and then ``Rewrite`` (two versions), as pylance does.
    Returns the new version, or ``ds`` itself when there is nothing to compact.

    ``max_rows_per_group``, ``num_threads`` and ``batch_size`` are accepted for pylance compatibility.

    Raises:
        UnsupportedFormatError: the dataset has indices (they would need remapping).
        CommitConflictError: a concurrent delete or compaction touched the same fragments.
    """
    if target_rows_per_fragment <= 0:
        raise ValueError("target_rows_per_fragment must be positive")
    ds._require_writable_format()
    ds._require_data_file_format()
    if materialize_deletions and materialize_deletions_threshold >= 1.0:
        materialize_deletions = False
    bins = plan(
        ds._fragment_readers(),
        target_rows_per_fragment,
        materialize_deletions,
        materialize_deletions_threshold,
    )
    if not bins:
        return ds
    if ds.manifest.index_section is not None:
        raise UnsupportedFormatError(f"{ds.uri} has indices; compacting it would require remapping them")
    # The rewrite commits after a ReserveFragments version: refuse before either if it cannot land.
    check_rebasable(ds._storage, Pending(Rewrite(()), ds.version))
    written: list[list[Fragment]] = []
    try:
        limit = max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE
        # Bins are independent: rewrite them in parallel, then fail (and clean up) if any failed.
        results = map_fragments(lambda bin_: _try(lambda: _rewrite_bin(ds, bin_, limit)), bins)
        written = [frags for frags, _ in results]
        for _, error in results:
            if error is not None:
                raise error
        total = sum(len(w) for w in written)
        reserved = commit(
            ds._storage,
            ds.manifest,
            Pending(ReserveFragments(total), ds.version),
            options=ds._commit_options,
            scheme=ds._scheme,
        )
        assert reserved.max_fragment_id is not None
        next_id = reserved.max_fragment_id - total + 1
        groups = []
        for bin_, new in zip(bins, written):
            with_ids = []
            for frag in new:
                with_ids.append(replace(frag, id=next_id))
                next_id += 1
            groups.append(RewriteGroup(tuple(f.fragment for f in bin_.fragments), tuple(with_ids)))
        manifest = commit(
            ds._storage,
            ds.manifest,
            Pending(Rewrite(tuple(groups)), ds.version),
            options=ds._commit_options,
            scheme=ds._scheme,
        )
    except BaseException as exc:
        if getattr(exc, "maybe_committed", False):
            raise
        for new in written:
            for frag in new:
                for f in frag.files:
                    with contextlib.suppress(OSError):
                        ds._storage.delete(paths.data_file_path(f.path))
        raise
    return ds._new_handle(manifest)
