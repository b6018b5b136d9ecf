"""Building the next manifest for the operations that change a dataset in place: ``Merge``,
``Update``, ``Project``, ``UpdateConfig`` and ``DataReplacement``, as pylance builds it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lance_table.errors import CommitError
from lance_table.format.manifest import DataFile, Fragment, Manifest, assign_fragment_ids
from lance_table.format.operations import DataReplacement, Merge, Project, Update, UpdateConfig

# The field id pylance gives a data file's column whose field was dropped.
TOMBSTONE_FIELD_ID = -2


def apply_inplace(base: Manifest, op: Any, next_id: int) -> Manifest | None:
    """The manifest after ``op`` on ``base`` (fragment ids before the version number and flags
    are set), or None when ``op`` is not one of these operations; ``next_id`` is the first unused
    fragment id.

    Raises:
        CommitError: an UpdateConfig names a field the schema does not have; a DataReplacement's
            files disagree on their fields, or change nothing.
    """
    if isinstance(op, Merge):
        m = replace(base, fields=op.schema, schema_metadata=dict(op.schema_metadata), fragments=op.fragments)
    elif isinstance(op, Update):
        m = _update(base, op, next_id)
    elif isinstance(op, Project):
        m = _project(base, op)
    elif isinstance(op, UpdateConfig):
        m = _update_config(base, op)
    elif isinstance(op, DataReplacement):
        m = _data_replacement(base, op)
    else:
        return None
    frags = tuple(sorted(_drop_tombstoned(m.fragments), key=lambda f: f.id))
    top = max(
        [f.id for f in frags] + ([base.max_fragment_id] if base.max_fragment_id is not None else []),
        default=None,
    )
    return replace(m, fragments=frags, max_fragment_id=top)


def _update(base: Manifest, op: Update, next_id: int) -> Manifest:
    removed = set(op.removed_fragment_ids)
    updated = {f.id: f for f in op.updated_fragments}
    kept = tuple(updated.get(f.id, f) for f in base.fragments if f.id not in removed)
    new = tuple(assign_fragment_ids(op.new_fragments, next_id))
    return replace(base, fragments=kept + new)


def _project(base: Manifest, op: Project) -> Manifest:
    """The new schema over the same fragments; data files none of whose fields remain are dropped."""
    remaining = {f.id for f in op.schema}
    frags = tuple(_kept_files(f, remaining) for f in base.fragments)
    metadata = base.schema_metadata if op.schema_metadata is None else op.schema_metadata
    return replace(base, fields=op.schema, schema_metadata=dict(metadata), fragments=frags)


def _kept_files(frag: Fragment, remaining: set[int]) -> Fragment:
    """``frag`` without its data files none of whose fields are in ``remaining`` (the same object
    when it keeps them all: a history's fragments are not copied one by one for nothing)."""
    files = tuple(d for d in frag.files if not remaining.isdisjoint(d.fields))
    return frag if len(files) == len(frag.files) else replace(frag, files=files)


def _update_config(base: Manifest, op: UpdateConfig) -> Manifest:
    m = base
    if op.config_updates is not None:
        m = replace(m, config=op.config_updates.apply(m.config))
    if op.table_metadata_updates is not None:
        m = replace(m, table_metadata=op.table_metadata_updates.apply(m.table_metadata))
    if op.schema_metadata_updates is not None:
        m = replace(m, schema_metadata=op.schema_metadata_updates.apply(m.schema_metadata, encode=True))
    if op.field_metadata_updates:
        ids = {f.id for f in m.fields}
        unknown = sorted(set(op.field_metadata_updates) - ids)
        if unknown:
            raise CommitError(
                f"field metadata updated for field ids {unknown}, which the schema does not have"
            )
        m = replace(
            m,
            fields=tuple(
                replace(f, metadata=op.field_metadata_updates[f.id].apply(f.metadata, encode=True))
                if f.id in op.field_metadata_updates
                else f
                for f in m.fields
            ),
        )
    return m


def _data_replacement(base: Manifest, op: DataReplacement) -> Manifest:
    if len({tuple(d.fields) for _, d in op.replacements}) > 1:
        raise CommitError("the new data files of a DataReplacement must all hold the same fields")
    current = {f.id: f for f in base.fragments}
    changed: dict[int, Fragment] = {}
    for frag_id, new_file in op.replacements:
        frag = changed.get(frag_id, current.get(frag_id))
        if frag is None:
            raise CommitError(f"fragment {frag_id} replaced by a DataReplacement is not in the dataset")
        files: list[DataFile] = []
        covered: set[int] = set()
        for d in frag.files:
            if (d.fields, d.file_major_version, d.file_minor_version) == (
                new_file.fields,
                new_file.file_major_version,
                new_file.file_minor_version,
            ):
                d = replace(d, path=new_file.path, file_size_bytes=new_file.file_size_bytes)
            covered.update(d.fields)
            files.append(d)
        if covered.isdisjoint(new_file.fields):
            files.append(new_file)  # the fields were all null in this fragment: a first file for them
        new = replace(frag, files=tuple(files))
        if new == frag:
            raise CommitError(
                f"the new data file {new_file.path} of fragment {frag_id} matches none of its data files "
                "(same fields and file version) and adds no new fields"
            )
        changed[frag_id] = new
    return replace(base, fragments=tuple(changed.get(f.id, f) for f in base.fragments))


def _drop_tombstoned(frags: tuple[Fragment, ...]) -> tuple[Fragment, ...]:
    """Fragments without the data files all of whose fields were dropped (tombstoned)."""
    if not any(d.fields and all(i == TOMBSTONE_FIELD_ID for i in d.fields) for f in frags for d in f.files):
        return frags
    return tuple(
        replace(
            f,
            files=tuple(
                d for d in f.files if not (d.fields and all(i == TOMBSTONE_FIELD_ID for i in d.fields))
            ),
        )
        for f in frags
    )
