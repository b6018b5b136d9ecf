"""Building the next manifest from the current one and a transaction."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

import pyarrow as pa

from lance_table._lazy import version as library_version
from lance_table.errors import BasePathError, CommitConflictError, CommitError
from lance_table.format import paths
from lance_table.format.bases import base_paths, register, with_base_paths
from lance_table.format.dictionaries import extended
from lance_table.format.fragment_source import FragmentSource
from lance_table.format.manifest import (
    DEFAULT_DATA_FORMAT,
    WRITER_LIBRARY,
    Fragment,
    Manifest,
    assign_fragment_ids,
    corrected_data_format,
)
from lance_table.format.operations import Update
from lance_table.format.transaction import (
    Append,
    Delete,
    Overwrite,
    ReserveFragments,
    Restore,
    Rewrite,
    Transaction,
    UpdateBases,
)
from lance_table.table.commit.apply_inplace import apply_inplace
from lance_table.table.commit.row_ids import uses_stable_row_ids, with_row_ids
from lance_table.table.indices import index_section_after

# The manifest stores max_fragment_id as a 32-bit unsigned integer.
MAX_FRAGMENT_ID = 2**32 - 1


def _next_id(base: Manifest | None) -> int:
    if base is None or base.max_fragment_id is None:
        return 0 if base is None else base.fragment_facts.top + 1
    return base.max_fragment_id + 1


def _max_id(fragments: tuple[Fragment, ...], floor: int | None) -> int | None:
    ids = [f.id for f in fragments]
    if floor is not None:
        ids.append(floor)
    return max(ids) if ids else None


def next_manifest(
    base: Manifest | None, txn: Transaction, restored: Manifest | None = None, now_ns: int | None = None
) -> Manifest:
    """The manifest that results from committing ``txn`` on top of ``base`` (None for a new dataset).

    ``restored`` is the manifest of the version a Restore brings back.
    """
    now = now_ns if now_ns is not None else time.time_ns()
    version = (base.version if base else 0) + 1
    op = txn.operation
    creates = base is None
    if base is None:
        if not isinstance(op, Overwrite):
            raise ValueError("a new dataset starts with an overwrite")
        base = Manifest(fields=op.schema, fragments=(), version=0, data_format=DEFAULT_DATA_FORMAT)
    m = base
    if isinstance(op, Append):
        start = _next_id(base)
        new = tuple(assign_fragment_ids(op.fragments, start))
        m = base.evolve(
            fragments=_appended(base, new),
            max_fragment_id=_max_id(new, base.max_fragment_id),
            dictionaries=_extend_dictionaries(base.dictionaries, op.dictionaries),
        )
    elif isinstance(op, Delete):
        m = _apply_delete(base, op)
    elif isinstance(op, Overwrite):
        start = _next_id(base) if base.version else 0
        new = tuple(assign_fragment_ids(op.fragments, start))
        config = {**base.config, **op.config_upsert_values}
        data_format = ("lance", op.data_format) if op.data_format else base.data_format
        m = base.evolve(
            data_format=data_format,
            fields=op.schema,
            schema_metadata=dict(op.schema_metadata),
            fragments=new,
            max_fragment_id=_max_id(new, base.max_fragment_id),
            config=config,
            index_section=None,
            dictionaries=dict(op.dictionaries),
        )
        if op.initial_bases:
            m = _register_initial_bases(m, op, creates)
    elif isinstance(op, Rewrite):
        m = _apply_rewrite(base, op)
    elif isinstance(op, UpdateBases):
        m = with_base_paths(base, register(base_paths(base), op.new_bases).values())
    elif isinstance(op, ReserveFragments):
        start = _next_id(base)
        m = base.evolve(max_fragment_id=start + op.num_fragments - 1)
    elif isinstance(op, Update) and (updated := _apply_update(base, op)) is not None:
        m = updated
    elif (inplace := apply_inplace(base, op, _next_id(base))) is not None:
        m = inplace
    elif isinstance(op, Restore):
        if restored is None:
            raise ValueError("restore needs the restored manifest")
        # (its fragments as they were read, not converted: see Manifest.evolve)
        top = max(restored.fragment_facts.top, -1 if base.max_fragment_id is None else base.max_fragment_id)
        m = restored.evolve(max_fragment_id=top if top >= 0 else None)
    else:  # pragma: no cover - guarded by Transaction.to_bytes
        raise ValueError(f"cannot apply {op.name}")
    fixed = corrected_data_format(m, f"the commit of version {version}")  # pylance 0.16's records
    if fixed is not None:
        m = m.evolve(data_format=fixed)
    _check_fragment_ids(m)
    section = index_section_after(base, op, m, uses_stable_row_ids(base), _next_id(base))
    m = with_row_ids(base if base.version or base.fragments else None, m, op, version)
    # (the rest in one copy: a manifest of a long history is a large dataclass to copy)
    return m.with_flags(
        index_section=section,
        version=version,
        timestamp_ns=max(now, base.timestamp_ns + 1),
        transaction_file=paths.transaction_file_name(txn.read_version, txn.uuid),
        writer_library=WRITER_LIBRARY,
        writer_version=library_version(),
        tag="",
        data_format=m.data_format or DEFAULT_DATA_FORMAT,
    )


def _appended(base: Manifest, new: tuple[Fragment, ...]) -> tuple[Fragment, ...] | FragmentSource:
    """The fragments of ``base`` followed by ``new``: when ``base``'s are not converted yet (a
    manifest as read), its fragments' bytes are reused as they are (see
    :meth:`FragmentSource.extended`), unless the dataset uses stable row ids (their assignment
    reads every fragment)."""
    source = base.fragment_source
    if source is not None and not uses_stable_row_ids(base):
        extended = source.extended(new)
        if extended is not None:
            return extended
    return base.fragments + new


def _register_initial_bases(m: Manifest, op: Overwrite, creates: bool) -> Manifest:
    """The manifest of a new dataset registering the Overwrite's ``initial_bases``.

    Raises:
        BasePathError: the dataset exists (only its creation registers bases, as in pylance), or
            the bases collide.
    """
    if not creates:
        raise BasePathError(
            "Cannot register new bases in Overwrite mode. Only CREATE mode can register new bases "
            "(add them with add_bases)",
            reference=op.initial_bases[0].name or op.initial_bases[0].path,
        )
    return with_base_paths(m, register({}, op.initial_bases).values())


def _check_fragment_ids(m: Manifest) -> None:
    """Refuse a manifest whose fragment ids repeat or run past what the format can store.

    Raises:
        CommitError: naming the ids.
    """
    found = m.fragment_facts
    if found.repeated:
        ids = [f.id for f in m.fragments]
        repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
        raise CommitError(
            f"the next version would hold fragment ids {repeated[:5]} twice; nothing was committed"
        )
    top = max(found.top, m.max_fragment_id if m.max_fragment_id is not None else -1)
    if top > MAX_FRAGMENT_ID:
        raise CommitError(
            f"the dataset has used every fragment id (the format stores at most {MAX_FRAGMENT_ID}, "
            f"this commit needs {top}); nothing was committed: copy the data into a new dataset"
        )


def _extend_dictionaries(
    current: Mapping[int, pa.Array], written: Mapping[int, pa.Array]
) -> dict[int, pa.Array]:
    """The dictionary values after appending files whose keys index ``written``: per field the
    longer of the two, when the other is a prefix of it.

    Raises:
        CommitConflictError: (not retryable) a field's values in the version committed on and in the
            new files disagree: another commit extended the dictionary differently since this write
            was planned, so the new files' keys mean other values; the write must be redone.
    """
    out = extended(current, written)
    if out is None:
        raise CommitConflictError(
            "the dictionary values of a field were changed by a concurrent commit; the new data "
            "files index other values, so the write must be redone on the latest version",
            retryable=False,
        )
    return out


def _positions(base: Manifest, ids: set[int]) -> dict[int, int] | None:
    """Where the fragments of ``ids`` are in ``base``, found without converting its fragments
    (see :meth:`FragmentSource.positions`); None when they are to be taken as objects: converted
    already, a dataset with stable row ids (their assignment reads every fragment), or an id not
    held once (a conflict, which the objects' way reports)."""
    source = base.fragment_source
    if source is None or uses_stable_row_ids(base):
        return None
    ordered = sorted(ids)
    at = source.positions(ordered)
    return None if at is None else dict(zip(ordered, at, strict=True))


def _edited(
    base: Manifest,
    replaced: Mapping[int, tuple[Fragment, ...]],
    removed: set[int],
    where: dict[int, int] | None = None,
) -> FragmentSource | None:
    """``base``'s fragments with those of the ids of ``replaced`` replaced by the fragments they
    map to and those of ``removed`` left out, made without converting the others when
    ``base``'s are not converted yet (see :meth:`FragmentSource.edited`: the same fragments, of
    the same bytes, as the conversion gives); None when they must be taken as objects: converted
    already, a dataset with stable row ids, an id not found (a conflict: the objects' way
    reports it), or a shape other than the common one."""
    if where is None:
        where = _positions(base, removed | replaced.keys())
    source = base.fragment_source
    if where is None or source is None:
        return None
    changes: dict[int, tuple[Fragment, ...]] = {where[i]: () for i in removed}
    changes.update({where[i]: new for i, new in replaced.items()})
    return source.edited(changes)


def _top_id(fragments: FragmentSource, floor: int | None) -> int | None:
    """:func:`_max_id` of fragments given as a source."""
    top = fragments.facts.top
    return top if floor is None else max(top, floor)


def _apply_delete(base: Manifest, op: Delete) -> Manifest:
    removed_ids = set(op.deleted_fragment_ids)
    edited = _edited(base, {f.id: (f,) for f in op.updated_fragments if f.id not in removed_ids}, removed_ids)
    if edited is not None:
        return base.evolve(fragments=edited)
    updated = {f.id: f for f in op.updated_fragments}
    removed = set(op.deleted_fragment_ids)
    present = {f.id for f in base.fragments}
    missing = (set(updated) | removed) - present
    if missing:
        raise CommitConflictError(
            f"fragments {sorted(missing)} changed by this delete no longer exist", retryable=True
        )
    frags = tuple(updated.get(f.id, f) for f in base.fragments if f.id not in removed)
    return base.evolve(fragments=frags)


#: a field id of -2 (pylance's tombstone of a dropped field) as a protobuf varint
_TOMBSTONE_VARINT = b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"


def _apply_update(base: Manifest, op: Update) -> Manifest | None:
    """An Update's manifest made as :func:`~lance_table.table.commit.apply_inplace.apply_inplace`
    makes it, without converting ``base``'s other fragments: the fragments it removes or updates
    replaced, its new ones (given the next free ids) added last -- which is the order by id
    ``apply_inplace`` sorts them into when ``base``'s ids ascend. None (take the objects' way)
    when they do not, when a data file may carry a tombstoned field (which ``apply_inplace``
    drops), or when the fragments cannot be found so (see :func:`_positions`)."""
    removed = set(op.removed_fragment_ids)
    updated = {f.id: f for f in op.updated_fragments if f.id not in removed}
    where = _positions(base, removed | updated.keys())
    source = base.fragment_source
    if where is None or source is None or not source.ids_ascend():
        return None
    new = tuple(assign_fragment_ids(op.new_fragments, _next_id(base)))
    ids = [f.id for f in new]
    if ids and (ids[0] <= source.facts.top or ids != sorted(set(ids))):
        return None
    if any(_TOMBSTONE_VARINT in f.pb_bytes for f in (*new, *updated.values())):
        return None
    changes: dict[int, tuple[Fragment, ...]] = {where[i]: () for i in removed}
    changes.update({where[i]: (f,) for i, f in updated.items()})
    if new:
        changes[len(source)] = new
    edited = source.edited(changes)
    if edited is None or _TOMBSTONE_VARINT in edited.entries():
        return None
    return base.evolve(fragments=edited, max_fragment_id=_top_id(edited, base.max_fragment_id))


def _apply_rewrite(base: Manifest, op: Rewrite) -> Manifest:
    """New fragments keep their ids (compaction reserved them), but those with id 0, which no
    reservation gives, get the next free ids (a Rewrite committed by hand, as pylance does)."""
    found = _positions(base, {f.id for group in op.groups for f in group.old_fragments})
    position = found if found is not None else {f.id: i for i, f in enumerate(base.fragments)}
    replaced: dict[int, tuple[Fragment, ...]] = {}
    dropped: set[int] = set()
    next_id = _next_id(base)
    for group in op.groups:
        if any(f.id == 0 for f in group.new_fragments):
            fresh = []
            for f in group.new_fragments:
                if f.id == 0:
                    f, next_id = replace(f, id=next_id), next_id + 1
                fresh.append(f)
            group = replace(group, new_fragments=tuple(fresh))
        old_ids = [f.id for f in group.old_fragments]
        missing = [i for i in old_ids if i not in position]
        if missing:
            raise CommitConflictError(
                f"fragments {missing} rewritten by compaction no longer exist", retryable=True
            )
        first = min(old_ids, key=lambda i: position[i])
        replaced[first] = group.new_fragments
        dropped.update(old_ids)
    edited = None if found is None else _edited(base, replaced, dropped - replaced.keys(), found)
    if edited is not None:
        return base.evolve(fragments=edited, max_fragment_id=_top_id(edited, base.max_fragment_id))
    out: list[Fragment] = []
    for f in base.fragments:
        if f.id in replaced:
            out.extend(replaced[f.id])
        if f.id not in dropped:
            out.append(f)
    return base.evolve(fragments=tuple(out), max_fragment_id=_max_id(tuple(out), base.max_fragment_id))
