"""Page statistics of legacy files: per batch, each eligible field's null count, minimum and maximum.

The statistics are a small table of their own inside the file, with one row per batch: for the k-th
field that has statistics, a non-nullable struct named by the data field's id in decimal (id 4k)
with children ``null_count`` (int64), ``min_value`` and ``max_value`` (the field's type, nullable).
Its pages are listed by a second page table covering stats ids ``0..max`` and a single batch.

How pylance computes them matters to whoever uses them (see :mod:`lance_table.file.legacy.prune`):
``null_count`` counts the nulls the writer saw (they read back as 0 / False); integer pages with no
value give min = type MAX, max = type MIN; floats ignore NaN (no value: -inf / +inf) and store a zero
minimum as -0.0 and a zero maximum as +0.0; strings and binaries are cut to 64 bytes before comparing
and, when any value was cut, the maximum is incremented (a binary carry that overflows gives null);
an empty minimum reads back as null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import CorruptFileError, SchemaError
from lance_table.file.legacy.container import LegacyMetadata, read_page_table
from lance_table.file.legacy.decode import Gen, PageContext, drive, field_gen, gather
from lance_table.file.runs import Runs
from lance_table.schema import FieldNode, build_tree
from lance_table.storage.sources import ByteSource

STATS_CHILDREN = ("null_count", "min_value", "max_value")


@dataclass(frozen=True)
class FieldStatistics:
    """The statistics of one data field: one entry per batch.

    ``trusted`` says per batch whether the statistics can be true (all of them when None); see
    :func:`plausible`. Pruning ignores the batches where they cannot.
    """

    field_id: int
    null_count: np.ndarray  # int64
    min_value: pa.Array
    max_value: pa.Array
    trusted: np.ndarray | None = None

    def untrusted(self) -> np.ndarray:
        """Per batch, whether the statistics are to be ignored."""
        if self.trusted is None:
            return np.zeros(len(self.null_count), bool)
        return ~self.trusted


@dataclass(frozen=True)
class PageStatistics:
    """The page statistics of a legacy file, by data field id."""

    batch_offsets: np.ndarray  # int64, [0, n0, n0 + n1, ...]
    fields: dict[int, FieldStatistics]

    @property
    def num_batches(self) -> int:
        return max(len(self.batch_offsets) - 1, 0)

    @property
    def batch_rows(self) -> np.ndarray:
        """The number of rows of each batch."""
        return np.diff(self.batch_offsets)


def read_statistics(source: ByteSource, meta: LegacyMetadata) -> PageStatistics | None:
    """Read every field's page statistics; None when the file has none.

    Raises:
        CorruptFileError: the statistics schema, page table or pages are damaged.
    """
    info = meta.stats
    if info is None:
        return None
    path = source.name
    nb = meta.num_batches
    try:
        roots = build_tree(info.fields)
    except SchemaError as exc:
        raise CorruptFileError(path, f"statistics schema is invalid: {exc}") from exc
    if not roots or not nb:
        return PageStatistics(meta.batch_offsets, {})
    ids = [n.id for r in roots for n in r.walk()]
    table = read_page_table(source, meta, info.page_table_position, [0, max(ids)], 1, "statistics page table")
    ctx = PageContext(path, table, meta.metadata_position, _no_dictionary(path))
    data_ids = []
    gens: list[Gen] = []
    for root in roots:
        fid, kids = _stats_struct(root, path)
        data_ids.append(fid)
        gens.extend(field_gen(ctx, kid, 0, Runs.span(0, nb), nb) for kid in kids)
    arrays = drive(gather(gens), lambda r: source.read_ranges(r) if r else [])
    fields = {}
    rows = np.diff(meta.batch_offsets)
    for k, fid in enumerate(data_ids):
        nulls, lo, hi = arrays[3 * k : 3 * k + 3]
        counts = nulls.to_numpy(zero_copy_only=False).astype(np.int64)
        fields[fid] = FieldStatistics(fid, counts, lo, hi, plausible(counts, lo, hi, rows))
    return PageStatistics(meta.batch_offsets, fields)


def plausible(null_count: np.ndarray, lo: pa.Array, hi: pa.Array, rows: np.ndarray) -> np.ndarray:
    """Per batch, whether statistics can describe a batch of ``rows`` rows: a null count within
    ``[0, rows]``, no NaN bound, and a minimum above the maximum only when every row is null (an
    integer page with no value stores the type's maximum and minimum). Damaged statistics fail
    this; the data pages themselves may still be fine, so such statistics are ignored rather than
    the file refused."""
    ok = (null_count >= 0) & (null_count <= rows)
    if pa.types.is_floating(lo.type):
        nan = pc.or_(pc.is_nan(lo), pc.is_nan(hi)).fill_null(False)
        ok &= ~np.asarray(nan, bool)
    try:
        inverted = np.asarray(pc.greater(lo, hi).fill_null(False), bool)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return np.zeros(len(null_count), bool)  # bounds that cannot be ordered say nothing
    ok &= ~(inverted & (null_count < rows))
    return ok


def _stats_struct(root: FieldNode, path: str) -> tuple[int, list[FieldNode]]:
    """The data field id a stats struct describes, and its three children in order."""
    name = root.name
    if not pa.types.is_struct(root.arrow_type) or not name.isdigit():
        raise CorruptFileError(path, f"statistics field {name!r} is not a struct named by a field id")
    by_name = {c.name: c for c in root.children}
    if set(by_name) != set(STATS_CHILDREN):
        raise CorruptFileError(path, f"statistics of field {name} have children {sorted(by_name)}")
    kids = [by_name[c] for c in STATS_CHILDREN]
    if kids[0].arrow_type != pa.int64() or kids[1].arrow_type != kids[2].arrow_type:
        raise CorruptFileError(path, f"statistics of field {name} have the wrong types")
    return int(name), kids


def _no_dictionary(path: str) -> Callable[[FieldNode], pa.Array]:
    def fail(node: FieldNode) -> pa.Array:
        raise CorruptFileError(path, f"statistics field {node.name!r} is dictionary encoded")

    return fail
