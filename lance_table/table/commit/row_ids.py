"""Stable row ids at commit time, as pylance assigns them: every new row of a dataset that uses
stable row ids gets the next ids of the manifest's ``next_row_id``, and its fragment records them
with the version that created (and last updated) each row.

Fragments of a new version that already carry row ids keep them (rows moved by an Update or by
compaction); an Update's new fragment with fewer ids than rows gets new ids for the rest.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from lance_table.errors import CommitError
from lance_table.format import flags
from lance_table.format.manifest import Fragment, Manifest
from lance_table.format.operations import Update
from lance_table.format.row_ids import RowMeta, row_id_meta
from lance_table.format.transaction import Append, Operation, Overwrite, Restore


def uses_stable_row_ids(manifest: Manifest | None) -> bool:
    return manifest is not None and bool(manifest.reader_feature_flags & flags.STABLE_ROW_IDS)


def with_row_ids(base: Manifest | None, m: Manifest, op: Operation, version: int) -> Manifest:
    """``m`` (the next manifest, built from ``base`` by ``op``) with row ids given to its new rows,
    when the dataset uses stable row ids (or ``op`` creates a dataset that will).

    Raises:
        CommitError: a new fragment holds more row ids than rows.
    """
    if isinstance(op, Restore):
        return m  # the restored version's row ids, as pylance restores them
    if base is None or base.version == 0:
        stable = isinstance(op, Overwrite) and op.stable_row_ids
    else:  # the option only applies to new datasets (pylance ignores it for existing ones)
        stable = uses_stable_row_ids(base)
    if not stable:
        return m
    next_row_id = base.next_row_id if base is not None else 0
    if isinstance(op, (Append, Overwrite, Update)):
        # the fragments this operation adds (an Overwrite's are all new)
        old_ids = (
            {f.id for f in base.fragments} if base is not None and not isinstance(op, Overwrite) else set()
        )
        created_of = _created_versions(base) if isinstance(op, Update) else None
        frags = []
        for f in m.fragments:
            if f.id not in old_ids:
                f, next_row_id = _assign(f, next_row_id, version, created_of)
            frags.append(f)
        m = replace(m, fragments=tuple(frags))
    return replace(
        m, next_row_id=next_row_id, reader_feature_flags=m.reader_feature_flags | flags.STABLE_ROW_IDS
    )


def _assign(
    frag: Fragment, next_row_id: int, version: int, created_of: tuple[np.ndarray, np.ndarray] | None
) -> tuple[Fragment, int]:
    """The fragment with row ids for every row and its version sequences, and the next free id."""
    meta = RowMeta(frag.row_id_meta, f"fragment {frag.id}")
    have = meta.ids if meta.ids is not None else np.zeros(0, np.uint64)
    if have.size > frag.physical_rows:
        raise CommitError(f"fragment {frag.id} has {have.size} row ids for {frag.physical_rows} rows")
    if meta.ids is not None and have.size == frag.physical_rows and meta.created is not None:
        return frag, next_row_id  # complete already (rows moved with their history)
    fresh = np.arange(next_row_id, next_row_id + frag.physical_rows - have.size, dtype=np.uint64)
    ids = np.concatenate([have, fresh])
    created = np.full(ids.size, version, np.uint64)
    if created_of is not None and have.size and created_of[0].size:
        # rows an Update moved keep the version that created them
        known_ids, known_versions = created_of
        pos = np.minimum(np.searchsorted(known_ids, have), known_ids.size - 1)
        hit = known_ids[pos] == have
        created[: have.size][hit] = known_versions[pos[hit]]
    updated = np.full(ids.size, version, np.uint64)
    return replace(frag, row_id_meta=row_id_meta(ids, created, updated)), next_row_id + fresh.size


def _created_versions(base: Manifest | None) -> tuple[np.ndarray, np.ndarray]:
    """Every row id of ``base`` (sorted) with the version that created its row."""
    ids, versions = [], []
    for f in base.fragments if base is not None else ():
        meta = RowMeta(f.row_id_meta, f"fragment {f.id}")
        if meta.ids is None:
            continue
        ids.append(meta.ids)
        versions.append(meta.created if meta.created is not None else np.ones(meta.ids.size, np.uint64))
    if not ids:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    all_ids, all_versions = np.concatenate(ids), np.concatenate(versions)
    order = np.argsort(all_ids, kind="stable")
    return all_ids[order], all_versions[order]


def carried_row_ids(old: list[tuple[Fragment, np.ndarray]], new: list[Fragment]) -> list[Fragment]:
    """Compaction: the ``new`` fragments holding, in order, the rows at the given live positions
    of the ``old`` fragments, with those rows' ids and versions carried over.

    Raises:
        CommitError: the new fragments hold another number of rows than were live.
    """
    ids, created, updated = [], [], []
    for frag, live in old:
        meta = RowMeta(frag.row_id_meta, f"fragment {frag.id}")
        if meta.ids is None:
            raise CommitError(f"fragment {frag.id} of a dataset with stable row ids has no row ids")
        ids.append(meta.ids[live])
        ones = np.ones(meta.ids.size, np.uint64)
        created.append((meta.created if meta.created is not None else ones)[live])
        updated.append((meta.updated if meta.updated is not None else ones)[live])
    all_ids, all_created, all_updated = (np.concatenate(a) for a in (ids, created, updated))
    if all_ids.size != sum(f.physical_rows for f in new):
        raise CommitError("compaction wrote another number of rows than were live")
    out, start = [], 0
    for f in new:
        end = start + f.physical_rows
        carried = row_id_meta(all_ids[start:end], all_created[start:end], all_updated[start:end])
        out.append(replace(f, row_id_meta=carried))
        start = end
    return out
