"""The manifest's index section after a write: which fragments each index covers, which indices
a version keeps, as pylance 14 decides it for the same operation.

lance_table neither builds nor reads indices; it only carries their metadata (the
``IndexSection`` of the manifest) from version to version, and must never leave an index claiming
rows it does not hold. :func:`index_section_after` is the one place that decides it for every
transaction kind; the per-rule functions below it are pylance's rules, usable on their own:

- ``Append``, ``ReserveFragments``, ``UpdateConfig``, ``DataReplacement``: unchanged.
- ``Overwrite``: no indices.
- ``Restore``: the restored version's indices (the caller copies them with the manifest).
- ``Delete``, ``Merge``, ``Project``: :func:`retain_relevant` (an index whose fields left the
  schema goes; a segment none of whose fragments remain goes when another segment of the same
  name still covers something). Fragment bitmaps are not changed: a bitmap may name fragments
  that no longer exist.
- ``Update``: fragments whose indexed fields were rewritten in place leave the bitmaps of the
  indices on those fields (:func:`prune_updated_fields`); with stable row ids, fragments made
  only of moved rows (none inserted) join the bitmaps of indices on untouched fields that covered
  every source fragment (:func:`register_moved_rows`); then :func:`retain_relevant`.
- ``Rewrite`` (compaction): with stable row ids the indices still hold the rows' ids, so each
  bitmap trades the old fragments of a group for its new ones (:func:`rewritten_bitmap`); with
  row addresses the bitmaps stay as they are and the rewrite records the old-to-new address
  mapping in the fragment reuse index (``__lance_frag_reuse``, see
  :mod:`lance_table.table.frag_reuse`), which the Rewrite carries in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pyroaring import BitMap

from lance_table._proto import table_pb2
from lance_table.errors import CommitConflictError
from lance_table.format.manifest import Manifest, assign_fragment_ids
from lance_table.format.operations import REWRITE_ROWS, Merge, Project, Update
from lance_table.format.row_ids import RowMeta
from lance_table.format.transaction import Delete, Overwrite, Restore, Rewrite, RewriteGroup

#: pylance's system indices: they cover no field and are never dropped with one.
FRAG_REUSE_INDEX_NAME = "__lance_frag_reuse"
MEM_WAL_INDEX_NAME = "__lance_mem_wal"
SYSTEM_INDEX_NAMES = frozenset({FRAG_REUSE_INDEX_NAME, MEM_WAL_INDEX_NAME})

IndexMetadata = Any  # a table_pb2.IndexMetadata protobuf message


def decode_section(section: bytes | None) -> list[IndexMetadata]:
    """The indices of an index section (the bytes after its length prefix); none for None."""
    if not section:
        return []
    return list(table_pb2.IndexSection.FromString(section).indices)


def encode_section(indices: Sequence[IndexMetadata]) -> bytes | None:
    """The index section holding ``indices``; None (no section) when there are none, as pylance
    writes it. Like pylance, every index records its ``index_version`` (0 when it had none)."""
    if not indices:
        return None
    out = table_pb2.IndexSection()
    for idx in indices:
        item = out.indices.add()
        item.CopyFrom(idx)
        if not item.HasField("index_version"):
            item.index_version = 0
    return out.SerializeToString()


def is_system_index(idx: IndexMetadata) -> bool:
    return idx.name in SYSTEM_INDEX_NAMES


def is_vector_index(idx: IndexMetadata) -> bool:
    return idx.HasField("index_details") and idx.index_details.type_url.endswith("VectorIndexDetails")


def keyed_by_row_id(idx: IndexMetadata) -> bool:
    """Whether pylance 14 keeps the index as it is through a compaction of a dataset with stable
    row ids (it holds the rows' ids): bitmap and vector indices. pylance rewrites the others
    (BTREE among them), which lance_table cannot do."""
    url = idx.index_details.type_url if idx.HasField("index_details") else ""
    return url.endswith(("VectorIndexDetails", ".BitmapIndexDetails"))


def fragment_bitmap(idx: IndexMetadata) -> BitMap | None:
    """The fragment ids the index covers; None when the index does not record them."""
    return BitMap.deserialize(idx.fragment_bitmap) if idx.fragment_bitmap else None


def set_fragment_bitmap(idx: IndexMetadata, frags: Iterable[int]) -> None:
    bitmap = BitMap(sorted(int(f) for f in frags))
    idx.fragment_bitmap = bitmap.serialize()


def retain_relevant(
    indices: list[IndexMetadata], field_ids: Iterable[int], fragment_ids: Iterable[int]
) -> list[IndexMetadata]:
    """The indices a version keeps given its schema's field ids and its fragment ids (pylance 14's
    ``retain_relevant_indices``): indices on a field no longer in the schema go; of the segments
    of one name, those covering no existing fragment go when another covers some, else the
    oldest stays (vector indices too). System indices always stay."""
    fields = set(field_ids)
    existing = BitMap(sorted(set(fragment_ids)))
    kept = [i for i in indices if all(f in fields for f in i.fields) or is_system_index(i)]

    def empty(idx: IndexMetadata) -> bool:
        bitmap = fragment_bitmap(idx)
        return bitmap is None or not (bitmap & existing)

    by_name: dict[str, list[IndexMetadata]] = {}
    for idx in kept:
        if idx.name != FRAG_REUSE_INDEX_NAME:
            by_name.setdefault(idx.name, []).append(idx)
    keep: set[bytes] = set()
    for same in by_name.values():
        full = [i for i in same if not empty(i)]
        if full:
            keep.update(i.uuid.uuid for i in full)
        else:
            keep.add(min(same, key=lambda i: i.dataset_version).uuid.uuid)
    return [i for i in kept if i.name == FRAG_REUSE_INDEX_NAME or i.uuid.uuid in keep]


def prune_updated_fields(
    indices: list[IndexMetadata], updated_fragment_ids: Iterable[int], fields_modified: Iterable[int]
) -> None:
    """Take the fragments whose ``fields_modified`` were rewritten in place out of the bitmaps of
    the indices on any of those fields (in place)."""
    modified = set(fields_modified)
    if not modified:
        return
    ids = list(updated_fragment_ids)
    for idx in indices:
        bitmap = fragment_bitmap(idx)
        if bitmap is not None and any(f in modified for f in idx.fields):
            set_fragment_bitmap(idx, bitmap - BitMap(ids))


def register_moved_rows(
    indices: list[IndexMetadata],
    moved_fragment_ids: Sequence[int],
    source_fragment_ids: Sequence[int],
    fields_changed: Iterable[int],
) -> None:
    """With stable row ids: add the new fragments holding only moved rows to the bitmaps of the
    indices on none of ``fields_changed`` that covered every source fragment and hold row ids
    (:func:`keyed_by_row_id`; pylance 14 leaves a BTREE alone), in place."""
    if not moved_fragment_ids:
        return
    changed = set(fields_changed)
    for idx in indices:
        bitmap = fragment_bitmap(idx)
        if bitmap is None or any(f in changed for f in idx.fields) or not keyed_by_row_id(idx):
            continue
        if all(f in bitmap for f in source_fragment_ids):
            set_fragment_bitmap(idx, bitmap | BitMap(moved_fragment_ids))


def rewritten_bitmap(bitmap: BitMap, groups: Sequence[RewriteGroup]) -> BitMap:
    """The fragments an index covers after a compaction whose rows keep their ids: each group the
    index covered is replaced by its new fragments.

    Raises:
        ValueError: a group mixes fragments the index covers with ones it does not.
    """
    out = BitMap(bitmap)
    for group in groups:
        old = [f.id for f in group.old_fragments]
        covered = [f in bitmap for f in old]
        if any(covered):
            if not all(covered):
                raise ValueError("a compaction group mixes indexed and unindexed fragments")
            out -= BitMap(old)
            out |= BitMap([f.id for f in group.new_fragments])
    return out


#: Reads the versions of a fragment reuse index whose details live in their own file.
VersionsLoader = Callable[[IndexMetadata], Sequence[Any]]


def reuse_moves(
    indices: list[IndexMetadata], load: VersionsLoader | None = None
) -> list[tuple[list[int], list[int]]]:
    """The (old fragments, new fragments) of every group the fragment reuse index records;
    ``load`` reads details kept in their own file (without it, such details count as none)."""
    for idx in indices:
        if idx.name == FRAG_REUSE_INDEX_NAME:
            details = table_pb2.FragmentReuseIndexDetails.FromString(idx.index_details.value)
            if details.HasField("inline"):
                versions: Sequence[Any] = details.inline.versions
            elif load is not None:
                versions = load(idx)
            else:
                return []
            return [
                ([f.id for f in g.old_fragments], [f.id for f in g.new_fragments])
                for v in versions
                for g in v.groups
            ]
    return []


def covered_fragments(idx: IndexMetadata, moves: list[tuple[list[int], list[int]]]) -> BitMap:
    """The fragments an index answers for: its bitmap, with each group a compaction recorded in
    the fragment reuse index (``moves``, oldest first) traded for its new fragments when the
    index covered all of the group's old ones."""
    bitmap = fragment_bitmap(idx) or BitMap()
    if is_system_index(idx):
        return bitmap
    for old, new in moves:
        if old and all(f in bitmap for f in old):
            bitmap = (bitmap - BitMap(old)) | BitMap(new)
    return bitmap


def coverage(
    indices: Sequence[IndexMetadata], load: VersionsLoader | None = None
) -> Callable[[int], tuple[int, ...]]:
    """A function from a fragment id to the positions of the indices covering it (what compaction
    may not mix), through the fragment reuse index as pylance sees them; an index without a bitmap
    covers every fragment."""
    moves = reuse_moves(list(indices), load)
    covered = [covered_fragments(idx, moves) if idx.fragment_bitmap else None for idx in indices]

    def of(fragment_id: int) -> tuple[int, ...]:
        return tuple(pos for pos, frags in enumerate(covered) if frags is None or fragment_id in frags)

    return of


def moved_only(fragments: Sequence[Any]) -> list[int]:
    """Positions of the fragments whose given row ids cover every row (no inserted rows)."""
    out = []
    for pos, frag in enumerate(fragments):
        if frag.row_id_meta:
            ids = RowMeta(frag.row_id_meta, f"fragment {frag.id}").ids
            if ids is not None and len(ids) == frag.physical_rows:
                out.append(pos)
    return out


def index_section_after(
    base: Manifest, op: Any, new: Manifest, stable_row_ids: bool, next_id: int = 0
) -> bytes | None:
    """The index section of the version ``op`` makes from ``base``; ``new`` is that version's
    manifest with its fragments (their final ids) and schema; ``stable_row_ids`` whether the
    dataset uses stable row ids; ``next_id`` the first fragment id an ``Update``'s new fragments
    without one were given.

    Raises:
        ValueError: a Rewrite group mixes fragments an index covers with ones it does not.
        CommitConflictError: a Rewrite's fragment reuse index extends one that is no longer the
            dataset's (retryable).
    """
    if isinstance(op, Overwrite):
        return None
    if isinstance(op, Restore):
        return new.index_section
    if not isinstance(op, (Delete, Merge, Project, Update, Rewrite)):
        return base.index_section  # Append, ReserveFragments, UpdateConfig, DataReplacement, ...
    indices = decode_section(base.index_section)
    if not indices:
        return None
    frags = [f.id for f in new.fragments]
    fields = [f.id for f in new.fields]
    if isinstance(op, (Delete, Merge, Project)):
        indices = retain_relevant(indices, fields, frags)
    elif isinstance(op, Update):
        prune_updated_fields(indices, [f.id for f in op.updated_fragments], op.fields_modified)
        if stable_row_ids and op.update_mode == REWRITE_ROWS:
            new_ids = [f.id for f in assign_fragment_ids(op.new_fragments, next_id)]  # as applied
            moved_ids = [new_ids[pos] for pos in moved_only(op.new_fragments)]
            sources = [*op.removed_fragment_ids, *(f.id for f in op.updated_fragments)]
            register_moved_rows(indices, moved_ids, sources, op.fields_for_preserving_frag_bitmap)
        indices = retain_relevant(indices, fields, frags)
    elif isinstance(op, Rewrite):
        if stable_row_ids:
            for idx in indices:
                bitmap = fragment_bitmap(idx)
                if bitmap is not None:
                    moved = rewritten_bitmap(bitmap, op.groups)
                    if not keyed_by_row_id(idx):  # pylance rewrites these; they leave the fragments
                        moved = bitmap - BitMap(f.id for g in op.groups for f in g.old_fragments)
                    set_fragment_bitmap(idx, moved)
        if op.frag_reuse_index is not None:
            current = [i.uuid.uuid for i in indices if i.name == FRAG_REUSE_INDEX_NAME]
            if current != ([op.frag_reuse_extends] if op.frag_reuse_extends else []):
                raise CommitConflictError(
                    "a concurrent commit changed the fragment reuse index this compaction extends; "
                    "run the compaction again",
                    retryable=True,
                )
            reuse = table_pb2.IndexMetadata.FromString(op.frag_reuse_index)
            indices = [i for i in indices if i.name != reuse.name] + [reuse]
    return encode_section(indices)
