"""pylance's ``ShardedBatchIterator`` (deprecated there in favour of samplers): the batches of one
shard of a dataset, for data-parallel training. Shard ``rank`` of ``world_size`` gets every
``world_size``-th fragment from ``rank`` (``granularity="fragment"``), or every ``world_size``-th
run of ``batch_size`` rows (``granularity="batch"``)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Literal

import numpy as np
import pyarrow as pa

from lance_table.table.dataset import LanceDataset
from lance_table.table.entry import dataset
from lance_table.table.scan_spec import Columns

__all__ = ["ShardedBatchIterator"]


class ShardedBatchIterator:
    """An iterator of the record batches of shard ``rank`` of ``world_size`` (pylance's).

    ``batch_readahead`` only tunes pylance's engine and is accepted as a no-op.

    Raises:
        ValueError: (when iterated) an unknown ``granularity``.
        NotImplementedError: (when iterated) ``with_row_id`` with ``granularity="batch"``, as in
            pylance.
    """

    def __init__(
        self,
        data: str | os.PathLike[str] | LanceDataset,
        rank: int,
        world_size: int,
        *,
        columns: Columns = None,
        batch_size: int = 1024 * 10,
        granularity: Literal["fragment", "batch"] = "fragment",
        batch_readahead: int = 8,
        with_row_id: bool = False,
    ) -> None:
        warnings.warn("ShardedBatchIterator is deprecated, use :class:`Sampler` instead", stacklevel=2)
        self._rank = rank
        self._world_size = world_size
        self._batch_size = batch_size
        self._granularity = granularity
        self._columns = columns
        self._with_row_id = with_row_id
        self._ds = data if isinstance(data, LanceDataset) else dataset(data)

    def _iter_over_fragments(self) -> Iterator[pa.RecordBatch]:
        fragments = self._ds.get_fragments()
        for frag in fragments[self._rank :: self._world_size]:
            yield from frag.to_batches(
                columns=self._columns, batch_size=self._batch_size, with_row_id=self._with_row_id
            )

    def _iter_over_batches(self) -> Iterator[pa.RecordBatch]:
        if self._with_row_id:
            raise NotImplementedError("with_row_id is not supported for batch sharding yet")
        total = self._ds.count_rows()
        step = self._world_size * self._batch_size
        for start in range(self._rank * self._batch_size, total, step):
            rows = np.arange(start, min(start + self._batch_size, total), dtype=np.int64)
            yield from self._ds.take(rows, columns=self._columns).to_batches()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self._granularity == "fragment":
            return self._iter_over_fragments()
        if self._granularity == "batch":
            return self._iter_over_batches()
        raise ValueError(f"Unrecognized granularity: {self._granularity}")
