"""How a batch of many small fragments reads their columns: each fragment's plan (its file's
reader and the layout of the columns' pages), whether a read of it belongs in a batch, and how
the columns of a read are split into groups each batched on its own (see
:mod:`lance_table.table.fragment_batch`, which reads the batches)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lance_table.file.container import FileVersion
from lance_table.file.field_shapes import LEAFLESS, field_shape, leaf_paths
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_0 import small_many as small_many20
from lance_table.file.v2_1 import small_layouts
from lance_table.schema import FieldNode
from lance_table.table.fragment import FragmentReader

Plan = tuple[LanceFileReader, small_layouts.FileLayout | small_many20.FileLayout]


def plans(frags: Sequence[FragmentReader], names: Sequence[str]) -> list[Plan | None]:
    """For each fragment, how a batch reads its columns ``names`` (its file's reader and layout),
    or None when it is read on its own.

    Raises:
        DataFileNotFoundError: a data file does not exist.
        CorruptFileError: a data file's row count is not the fragment's.
    """
    if not frags or not names:
        return [None] * len(frags)
    roots = frags[0].roots
    nodes = [roots[n] for n in names]
    if any(field_shape(n) == LEAFLESS for n in nodes):
        return [None] * len(frags)
    key = tuple((n.id, str(n.arrow_type)) for n in nodes)  # (a string's hash is kept)
    # the fields' leaves' ids (a field with nesting: its leaves', which the manifest lists)
    leaves = {leaf.id for node in nodes for leaf, _ in leaf_paths(node, [])}
    # whether a data file's fields hold them all, by its fields (the same in most files)
    holds: dict[tuple[int, ...], bool] = {}
    return [_plan(f, nodes, key, leaves, holds) for f in frags]


def _plan(
    frag: FragmentReader,
    nodes: list[FieldNode],
    key: tuple[Any, ...],
    leaves: set[int],
    holds: dict[tuple[int, ...], bool],
) -> Plan | None:
    files = frag.fragment.files
    if len(files) != 1:
        return None
    data_file = files[0]
    if data_file.base_id is not None or (data_file.file_major_version, data_file.file_minor_version) < (2, 0):
        return None
    fields = data_file.fields
    held = holds.get(fields)
    if held is None:
        held = holds[fields] = leaves.issubset(fields)
    if not held:
        return None
    reader = frag._reader(data_file)
    if not isinstance(reader, LanceFileReader):
        return None
    frag.physical_rows  # noqa: B018 - the file's row count checked against the manifest's
    key = (key, data_file.fields, data_file.column_indices)  # columns as this manifest maps them
    found = reader.kept_layout(key, lambda: _file_layout(reader, nodes, frag.stored_roots(data_file)))
    return None if found is None else (reader, found)


def _file_layout(
    reader: LanceFileReader, nodes: list[FieldNode], by_id: dict[int, FieldNode]
) -> small_layouts.FileLayout | small_many20.FileLayout | None:
    """The layout of the file's columns of ``nodes`` (``by_id``: the file's fields by the dataset
    field id the manifest maps them to), when each is stored with the type the dataset gives it."""
    names = []
    for node in nodes:
        stored = by_id.get(node.id)
        if stored is None or stored.arrow_type != node.arrow_type:
            return None
        names.append(stored.name)
    if reader.metadata.version is FileVersion.V2_0:
        return small_many20.layout(reader, names)
    return small_layouts.layout(reader, names)


def batchable(plan: Plan | None, rows: int, runs: int = 0) -> bool:
    """Whether a read of ``rows`` rows (in ``runs`` runs, when known) of a fragment with this plan
    belongs in a batch."""
    if plan is None or rows <= 0:
        return False
    lay = plan[1]
    return isinstance(lay, small_many20.FileLayout) or small_layouts.worth_batching(lay, rows, runs)


def by_columns(
    frags: Sequence[FragmentReader], names: list[str], found: Sequence[Plan | None], rows: Sequence[int]
) -> list[bool]:
    """For each fragment, whether a read of ``rows[k]`` of its rows belongs in a batch: its plan
    for ``names`` says so (:func:`batchable`), or, of several columns read whole, one on its
    own is batchable (its pages beside another column's, or with other columns between). (A
    range of a fragment read in parts is not: the batch would decode a page whole for each.)"""
    ok = [batchable(p, r) for p, r in zip(found, rows)]
    if len(names) < 2 or all(ok):
        return ok
    whole = [r >= f.physical_rows for f, r in zip(frags, rows)]
    for name in names:
        own = plans(frags, [name])
        ok = [o or (w and batchable(p, r)) for o, w, p, r in zip(ok, whole, own, rows)]
    return ok


#: a batch of all the columns read that holds fewer files than this is split (see narrow_groups)
FEW_FILES = 8


def narrow_groups(
    frags: Sequence[FragmentReader], names: list[str], found: Sequence[Plan | None], batch_bytes: int
) -> list[tuple[list[str], list[Plan | None]]] | None:
    """The columns ``names`` of 2.1/2.2 files as two groups each read on its own, when a batch of
    all of them (at most ``batch_bytes`` of files) would hold fewer than :data:`FEW_FILES` files
    because of some wide columns (vectors, text of fragments of a few thousand rows): the narrow
    ones (as many as fit that many files to a batch) batched across the files by themselves, the
    wide ones by themselves (split again the same way when read). A batch's decoding costs some
    tens of numpy calls per column whatever its files hold. None when the columns are read
    together."""
    cap = batch_bytes // FEW_FILES
    lays = [p[1] for p in found if p is not None]  # (a fragment not batched is read alone anyway)
    if not lays or max(lay.length for lay in lays) <= cap:
        return None
    if not all(isinstance(lay, small_layouts.FileLayout) for lay in lays):
        return None
    sizes = np.zeros(len(names), np.int64)  # each column's most bytes in a file
    for lay in lays:
        for c, col in enumerate(lay.columns):
            if not isinstance(col, small_layouts.ColumnLayout):
                return None
            sizes[c] = max(sizes[c], col.data_size + col.dict_size)
    # the widest columns leave the batch until the others fit FEW_FILES files to one
    order = np.argsort(-sizes, kind="stable")
    narrow_bytes = int(sizes.sum())
    wide_count = 0
    while wide_count < len(names) and narrow_bytes > cap:
        narrow_bytes -= int(sizes[order[wide_count]])
        wide_count += 1
    if not 0 < wide_count < len(names):
        return None
    wide = [names[c] for c in sorted(order[:wide_count].tolist())]
    narrow = [name for name in names if name not in wide]
    return [(narrow, plans(frags, narrow)), (wide, plans(frags, wide))]


def column_groups(
    frags: Sequence[FragmentReader],
    names: list[str],
    rows: Sequence[int],
    found: Sequence[Plan | None],
    ok: Sequence[bool],
    spread: Sequence[int],
    batch_bytes: int,
) -> list[tuple[list[str], list[Plan | None]]] | None:
    """The columns ``names`` as groups each read on its own, with its plans, when the fragments
    are not batched with all the columns (files too large for two to share a batch of all of
    them, or pages of the columns far apart, or too few rows read for pages of many chunks), but
    some columns are batched across the files by themselves, two files or more to a batch (ids
    and floats beside vectors of a living table's fragments of 20k rows): those columns as one
    group (or each on its own, when their pages lie far apart in the files), the others as one
    more (read file by file). ``rows``: the rows read of each fragment (in ``spread`` runs);
    ``ok``: whether they are :func:`batchable` with ``found``. None when the columns are read
    together."""
    half = batch_bytes // 2
    # the fragments a batch of all the columns would not read with others
    alone = [
        k
        for k, (o, p, r) in enumerate(zip(ok, found, rows))
        if r and (not o or p[1].length > half)  # type: ignore[index]
    ]
    if len(alone) < 2:
        return None

    def small(found_: Sequence[Plan | None]) -> bool:
        """Whether the fragments in ``alone`` share batches of these plans, two or more to one."""
        return all(
            (p := found_[k]) is not None and batchable(p, rows[k], spread[k]) and p[1].length <= half
            for k in alone
        )

    own = {name: plans(frags, [name]) for name in names}
    few = [name for name in names if small(own[name])]
    if not few:
        return None
    rest = [name for name in names if name not in few]
    together = plans(frags, few) if len(few) > 1 else None
    if len(few) == 1 or (together is not None and small(together)):
        groups = [(few, together if together is not None else own[few[0]])]
    else:
        groups = [([name], own[name]) for name in few]
    if rest:
        groups.append((rest, own[rest[0]] if len(rest) == 1 else plans(frags, rest)))
    return groups
