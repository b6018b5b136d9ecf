"""The table layer: versioned datasets made of fragments, with commits, scans, deletes and compaction."""

from __future__ import annotations

from lance_table.table.dataset import Dataset, LanceDataset
from lance_table.table.entry import dataset, write_dataset

__all__ = ["Dataset", "LanceDataset", "dataset", "write_dataset"]
