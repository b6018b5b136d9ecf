"""The table layer: versioned datasets made of fragments, with commits, scans, deletes and compaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lance_table._lazy as _lazy

if TYPE_CHECKING:
    from lance_table.table.dataset import Dataset, LanceDataset
    from lance_table.table.entry import dataset, write_dataset

#: imported on first use (PEP 562), so that importing one module of this package (the spark
#: worker's, the version listing's) does not import every operation of the dataset handle
_LAZY: _lazy.Names = {
    "Dataset": ("lance_table.table.dataset", "Dataset"),
    "LanceDataset": ("lance_table.table.dataset", "LanceDataset"),
    "dataset": ("lance_table.table.entry", "dataset"),
    "write_dataset": ("lance_table.table.entry", "write_dataset"),
}

__getattr__, __dir__ = _lazy.hooks(__name__, _LAZY)  # public names imported on first use


__all__ = ["Dataset", "LanceDataset", "dataset", "write_dataset"]
