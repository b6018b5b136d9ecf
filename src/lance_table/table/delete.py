"""Planning a delete: find matching rows with the predicate's columns only, write deletion files."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc

from lance_table._parallel import map_fragments
from lance_table.format.manifest import Fragment
from lance_table.format.transaction import Delete
from lance_table.table.conflicts import Pending
from lance_table.table.deletion import union, write_deletions
from lance_table.table.fragment import FragmentReader
from lance_table.table.scanner import READ_CHUNK_ROWS, make_spec, matching_positions

if TYPE_CHECKING:
    from lance_table.table.dataset import Dataset


def plan_delete(ds: Dataset, predicate: str | pc.Expression) -> Pending:
    """The Delete operation for ``predicate`` against ``ds`` (deletion files already written)."""
    spec = make_spec(ds.schema, [], predicate, False, None, None, None)
    updated: list[Fragment] = []
    removed: list[int] = []
    additions: dict[int, np.ndarray] = {}
    bases = {}

    def matches(frag: FragmentReader) -> np.ndarray | None:
        parts = []
        for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS):
            runs = matching_positions(frag, spec, lo, min(lo + READ_CHUNK_ROWS, frag.physical_rows))
            if runs.total:
                parts.append(runs.positions())
        return np.concatenate(parts).astype(np.uint32) if parts else None

    frags = ds._fragment_readers()
    for frag, matched in zip(frags, map_fragments(matches, frags)):
        if matched is None:
            continue
        additions[frag.fragment.id] = matched
        bases[frag.fragment.id] = frag.fragment.deletion_file
        merged = union(frag.deleted, matched)
        if merged.size >= frag.physical_rows:
            removed.append(frag.fragment.id)
        else:
            df = write_deletions(ds._storage, frag.fragment, merged, ds.version)
            updated.append(replace(frag.fragment, deletion_file=df))
    text = predicate if isinstance(predicate, str) else str(predicate)
    return Pending(Delete(tuple(updated), tuple(removed), text), ds.version, additions, bases)
