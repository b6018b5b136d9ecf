"""The change data feed: the rows each version inserts, deletes and updates, as Delta Lake's
``table_changes`` shows them (``_change_type``, ``_commit_version``, ``_commit_timestamp``).

What version ``v`` changed is found by comparing its manifest with version ``v - 1``'s, and its
transaction says how to read the difference:

- a fragment that only ``v`` lists: its rows are inserted; one that only ``v - 1`` lists: its live
  rows are deleted;
- a fragment both list with the same data files: the rows ``v``'s deletion file adds are deleted
  (a restore that shrinks it inserts the rows it gives back);
- a fragment both list whose files holding the read columns differ (a column rewritten in place,
  ``DataReplacement`` or an update of columns): its rows keep their positions, so each live row
  is an ``update_preimage`` (``v - 1``'s values) and an ``update_postimage`` (``v``'s);
- an ``Update`` (``update``, ``merge_insert``) of a dataset with stable row ids keeps an updated
  row's id: a deleted row whose id a new row of ``v`` carries is an ``update_preimage``, and that
  new row its ``update_postimage`` (ids at or above ``v - 1``'s next row id are new rows). Without
  stable row ids an update shows as a delete and an insert;
- a compaction (``Rewrite``) moves rows without changing them: nothing; an ``Overwrite`` deletes
  every row of ``v - 1`` and inserts every row of ``v``; schema changes (``Project``, ``Merge``)
  change no row of the columns read, unless they drop, rename or retype one: then
  :class:`~lance_table.errors.SchemaError` names the version and the column.

The change rows of a version are planned as :class:`ChangePiece` s (a fragment, which rows of it,
and their change type) without reading any data; a piece is read in slices of its rows
(:func:`read_piece`), taking only those rows, so memory stays bounded by the slice, never the
version.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pyarrow as pa

from lance_table.errors import SchemaError
from lance_table.file.runs import Runs
from lance_table.format import flags
from lance_table.format.bases import BasePath, base_paths
from lance_table.format.manifest import Fragment, Manifest
from lance_table.format.operations import REWRITE_ROWS, Update
from lance_table.format.transaction import OtherOperation, Overwrite, Restore, Rewrite, Transaction
from lance_table.schema import LanceField, arrow_schema_from_fields, build_tree
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.deletion import read_deletions
from lance_table.table.fragment import FragmentReader
from lance_table.table.row_ids import fragment_row_ids

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
#: the columns each change row carries after the data columns
CHANGE_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string(), nullable=False),
    pa.field(COMMIT_VERSION, pa.int64(), nullable=False),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), nullable=False),
)
INSERT = "insert"
DELETE = "delete"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"
#: rows a read of change rows yields at most in one batch, unless told otherwise
DEFAULT_BATCH_SIZE = 64 * 1024


@dataclass(frozen=True)
class Side:
    """The version whose manifest a piece's fragment comes from, and what its rows are read with."""

    version: int
    fields: tuple[LanceField, ...]
    schema_metadata: Mapping[str, bytes] = field(default_factory=dict)
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict)
    bases: Mapping[int, BasePath] = field(default_factory=dict)

    @classmethod
    def of(cls, manifest: Manifest) -> Side:
        """The side of one manifest."""
        return cls(
            manifest.version,
            tuple(manifest.fields),
            dict(manifest.schema_metadata),
            dict(manifest.dictionaries or {}),
            base_paths(manifest),
        )


@dataclass(frozen=True)
class Pairing:
    """Stable row ids pair an update's deleted and new rows: ``added`` are the version's new
    fragments; their rows with ids below ``next_row_id`` (the previous version's) are updated rows."""

    next_row_id: int
    added: tuple[Fragment, ...]


@dataclass(frozen=True)
class ChangePiece:
    """Change rows of one version: rows of one fragment as ``side``'s manifest lists it.

    The rows are the fragment's positions deleted in ``within`` (every position when None), less
    those deleted in any of ``minus``, in position order; ``rows`` counts them. With ``pairing``,
    a ``delete`` row is an ``update_preimage`` and an ``insert`` row an ``update_postimage`` when
    its stable row id says so.
    """

    version: int
    timestamp_ns: int
    side: Side
    fragment: Fragment
    change: str
    rows: int
    within: Fragment | None = None
    minus: tuple[Fragment, ...] = ()
    pairing: Pairing | None = None


@dataclass(frozen=True)
class VersionChanges:
    """The planned change rows of one version (no data read), in a fixed order."""

    version: int
    timestamp_ns: int
    operation: str
    pieces: tuple[ChangePiece, ...]

    @property
    def rows(self) -> int:
        """How many change rows the version has."""
        return sum(p.rows for p in self.pieces)


def _deleted(storage: Storage, fragment: Fragment, version: int) -> np.ndarray:
    return read_deletions(storage, fragment, version=version)


def _minus(storage: Storage, minus: Sequence[Fragment], version: int) -> np.ndarray:
    sets = [_deleted(storage, f, version) for f in minus if f.deletion_file is not None]
    if not sets:
        return np.zeros(0, np.int64)
    out = sets[0].astype(np.int64)
    for more in sets[1:]:
        out = np.union1d(out, more.astype(np.int64))
    return out


def selected_positions(storage: Storage, piece: ChangePiece) -> np.ndarray:
    """The sorted physical positions of a piece's rows in its fragment (int64).

    Raises:
        CorruptFileError: a deletion file does not decode or disagrees with its manifest.
        DataFileNotFoundError: a deletion file is gone (its version was cleaned up).
    """
    dropped = _minus(storage, piece.minus, piece.side.version)
    if piece.within is None:
        keep = np.ones(piece.fragment.physical_rows, bool)
        keep[dropped] = False
        return np.flatnonzero(keep).astype(np.int64)
    inside = _deleted(storage, piece.within, piece.side.version).astype(np.int64)
    return np.setdiff1d(inside, dropped, assume_unique=True)


def _count(
    storage: Storage, fragment: Fragment, within: Fragment | None, minus: Sequence[Fragment], v: int
) -> int:
    dropped = _minus(storage, minus, v)
    if within is None:
        return fragment.physical_rows - int(dropped.size)
    inside = _deleted(storage, within, v).astype(np.int64)
    return int(np.setdiff1d(inside, dropped, assume_unique=True).size)


def _field_ids(fields: Sequence[LanceField], columns: Sequence[str]) -> frozenset[int]:
    """The ids of the named top-level columns and of all their children."""
    wanted = {f.id for f in fields if f.parent_id == -1 and f.name in columns}
    grew = True
    while grew:
        more = {f.id for f in fields if f.parent_id in wanted} - wanted
        wanted |= more
        grew = bool(more)
    return frozenset(wanted)


def _files_of(fragment: Fragment, ids: frozenset[int]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """What holds the columns ``ids`` in a fragment: the files, with the fields they hold of them."""
    return tuple(
        (f.path, tuple(i for i in f.fields if i in ids))
        for f in fragment.files
        if any(i in ids for i in f.fields)
    )


def check_columns(previous: Manifest, current: Manifest, columns: Sequence[str], operation: str) -> None:
    """Refuse a version that drops, renames or retypes a column the changes are read for.

    Raises:
        SchemaError: naming the version, its operation and the column.
    """
    before = arrow_schema_from_fields(previous.fields)
    after = arrow_schema_from_fields(current.fields)
    for name in columns:
        if name not in before.names:
            continue  # read from a later version on (the caller checked the start)
        if name not in after.names:
            problem = "drops or renames"
        elif after.field(name).type != before.field(name).type:
            problem = f"changes the type ({before.field(name).type} to {after.field(name).type}) of"
        else:
            continue
        raise SchemaError(
            f"version {current.version} ({operation}) {problem} column {name!r}, which the change rows "
            "are read with; read the changes from the following version on, with the new schema"
        )


def _operation_name(transaction: Transaction | None) -> str:
    if transaction is None:
        return "an unknown operation"
    op = transaction.operation
    return f"operation {op.name if isinstance(op, OtherOperation) else type(op).__name__}"


def _stable(manifest: Manifest) -> bool:
    return bool(manifest.reader_feature_flags & flags.STABLE_ROW_IDS)


def all_inserted(manifest: Manifest) -> VersionChanges:
    """Every live row of a version as an insert of that version (the first version, or the table
    as a change feed starts from it); the manifest's counts alone, no file is read."""
    at = (manifest.version, manifest.timestamp_ns)
    pieces = _whole(at, Side.of(manifest), manifest.fragments, INSERT, None)
    return VersionChanges(*at, "snapshot", tuple(pieces))


def _whole(
    at: tuple[int, int], side: Side, fragments: Sequence[Fragment], change: str, pairing: Pairing | None
) -> list[ChangePiece]:
    """Pieces of every live row of ``fragments`` (as ``side`` lists them), in id order; ``at``: the
    change's version and timestamp."""
    return [
        ChangePiece(*at, side, frag, change, frag.num_rows, None, (frag,), pairing)
        for frag in sorted(fragments, key=lambda f: f.id)
        if frag.num_rows > 0
    ]


def plan_version(
    storage: Storage,
    previous: Manifest,
    current: Manifest,
    transaction: Transaction | None,
    columns: Sequence[str],
) -> VersionChanges:
    """The change rows of ``current`` against ``previous`` (the version before it), for ``columns``.

    Deleted and preimage rows come first (by fragment id), then inserted and postimage rows.

    Raises:
        SchemaError: the version drops, renames or retypes one of ``columns``.
        CorruptFileError: a deletion file does not decode or disagrees with its manifest.
        DataFileNotFoundError: a deletion file is gone (its version was cleaned up).
    """
    op = transaction.operation if transaction is not None else None
    name = _operation_name(transaction)
    check_columns(previous, current, columns, name)
    v, ts = at = current.version, current.timestamp_ns
    if isinstance(op, Rewrite):  # compaction: the same rows, moved
        return VersionChanges(v, ts, name, ())
    old, new = Side.of(previous), Side.of(current)
    before = {f.id: f for f in previous.fragments}
    after = {f.id: f for f in current.fragments}
    if isinstance(op, Overwrite):
        pieces = _whole(at, old, previous.fragments, DELETE, None) + _whole(
            at, new, current.fragments, INSERT, None
        )
        return VersionChanges(v, ts, name, tuple(pieces))
    pairing = None
    if isinstance(op, Update) and op.update_mode == REWRITE_ROWS and _stable(previous) and _stable(current):
        fresh = tuple(f for i, f in sorted(after.items()) if i not in before)
        pairing = Pairing(previous.next_row_id, fresh)
    ids_before, ids_after = _field_ids(previous.fields, columns), _field_ids(current.fields, columns)
    removed = [f for i, f in sorted(before.items()) if i not in after]
    added = [f for i, f in sorted(after.items()) if i not in before]
    olds = _whole(at, old, removed, DELETE, pairing)
    news: list[ChangePiece] = []
    for i in sorted(before.keys() & after.keys()):
        fp, fc = before[i], after[i]
        if fp == fc:
            continue
        if _files_of(fp, ids_before) != _files_of(fc, ids_after):
            if op is None or isinstance(op, Restore):
                # not a column rewrite: the fragment id may stand for other rows now
                olds += _whole(at, old, [fp], DELETE, None)
                news += _whole(at, new, [fc], INSERT, None)
                continue
            # a column rewritten in place: each row keeps its position
            both = (fp, fc)
            n = _count(storage, fp, None, both, v)
            if n:
                olds.append(ChangePiece(v, ts, old, fp, UPDATE_PREIMAGE, n, None, both))
                news.append(ChangePiece(v, ts, new, fc, UPDATE_POSTIMAGE, n, None, both))
        if fc.deletion_file != fp.deletion_file:
            gone = _count(storage, fp, fc, (fp,), v) if fc.deletion_file is not None else 0
            if gone:
                olds.append(ChangePiece(v, ts, old, fp, DELETE, gone, fc, (fp,), pairing))
            back = _count(storage, fc, fp, (fc,), v) if fp.deletion_file is not None else 0
            if back:
                news.append(ChangePiece(v, ts, new, fc, INSERT, back, fp, (fc,)))
    news += _whole(at, new, added, INSERT, pairing)
    olds.sort(key=lambda p: p.fragment.id)  # stable: a fragment's preimages before its deletes
    news.sort(key=lambda p: p.fragment.id)
    return VersionChanges(v, ts, name, tuple(olds + news))


@lru_cache(maxsize=4)
def _updated_ids(pairing: Pairing) -> np.ndarray:
    """The sorted ids of the rows an update kept (its new rows' ids below ``next_row_id``); kept
    for the next pieces of the same version a task reads."""
    parts = [fragment_row_ids(f, "an update's new fragments") for f in pairing.added]
    found = [p for p in parts if p is not None]
    ids = np.concatenate(found) if found else np.zeros(0, np.uint64)
    return np.sort(ids[ids < np.uint64(pairing.next_row_id)])


def _change_types(storage: Storage, piece: ChangePiece, positions: np.ndarray) -> pa.Array:
    """The ``_change_type`` of a piece's rows at ``positions``."""
    n = positions.size
    if piece.pairing is None or piece.change not in (INSERT, DELETE):
        return pa.array(np.full(n, piece.change, object), pa.string())
    where = f"{storage.uri.rstrip('/')} version {piece.side.version} (manifest)"
    ids = fragment_row_ids(piece.fragment, where)
    if ids is None:
        return pa.array(np.full(n, piece.change, object), pa.string())
    mine = ids[positions]
    if piece.change == INSERT:
        paired = mine < np.uint64(piece.pairing.next_row_id)
        labels = np.where(paired, UPDATE_POSTIMAGE, INSERT)
    else:
        kept = _updated_ids(piece.pairing)
        at = np.minimum(np.searchsorted(kept, mine), max(kept.size - 1, 0))
        paired = kept[at] == mine if kept.size else np.zeros(n, bool)
        labels = np.where(paired, UPDATE_PREIMAGE, DELETE)
    return pa.array(labels.astype(object), pa.string())


def read_piece(
    storage: Storage,
    piece: ChangePiece,
    columns: Sequence[str],
    lo: int = 0,
    hi: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    types: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """Rows ``[lo, hi)`` of a piece (its rows in position order): ``columns`` as the piece's
    version stores them, then :data:`CHANGE_FIELDS`. Only those rows are read. A column the
    piece's version does not have yet (added later) is null, typed as in ``types``.

    Raises:
        SchemaError: a column is neither in the piece's version nor in ``types``.
        CorruptFileError: a data or deletion file does not decode or disagrees with its manifest.
        DataFileNotFoundError: a file is gone (its version was cleaned up).
    """
    side = piece.side
    roots = {n.name: n for n in build_tree(side.fields)}
    absent = [c for c in columns if c not in roots]
    for name in absent:
        if types is None or name not in types.names:
            raise SchemaError(f"column {name!r} is not in version {side.version}; columns are {list(roots)}")
    positions = selected_positions(storage, piece)[lo:hi]
    if not positions.size:
        return
    reader = FragmentReader(
        piece.fragment, storage, roots, version=side.version, dictionaries=side.dictionaries, bases=side.bases
    )
    kinds = _change_types(storage, piece, positions)
    stamp = pa.scalar(piece.timestamp_ns // 1000, pa.timestamp("us", tz="UTC"))
    present = [c for c in columns if c in roots]
    for start in range(0, positions.size, batch_size):
        part = positions[start : start + batch_size]
        n = part.size
        table = reader.read(present, Runs.from_sorted_unique(part)) if present else None
        data: list[tuple[pa.Field, pa.Array | pa.ChunkedArray]] = []
        for name in columns:
            if name in roots:
                assert table is not None
                data.append((table.schema.field(name), table.column(name)))
            else:
                assert types is not None
                data.append((types.field(name).with_nullable(True), pa.nulls(n, types.field(name).type)))
        arrays = [a for _, a in data]
        arrays += [
            kinds[start : start + n],
            pa.array(np.full(n, piece.version, np.int64)),
            pa.repeat(stamp, n),
        ]
        schema = pa.schema([*(f for f, _ in data), *CHANGE_FIELDS])
        yield from pa.Table.from_arrays(arrays, schema=schema).to_batches(max_chunksize=batch_size)


class ManifestCache:
    """The manifests and transactions of versions read so far (a change feed reads each twice:
    as a version, and as the one before the next)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._read: dict[int, tuple[Manifest, Transaction | None]] = {}

    def get(self, version: int) -> tuple[Manifest, Transaction | None]:
        """A version's manifest and transaction.

        Raises:
            VersionNotFoundError: the version does not exist (or was cleaned up).
        """
        if version not in self._read:
            mf = versions.read_manifest_file(self.storage, versions.find_entry(self.storage, version))
            self._read[version] = (mf.manifest, versions.read_transaction(self.storage, mf))
        return self._read[version]

    def forget_before(self, version: int) -> None:
        """Drop what versions before ``version`` were."""
        self._read = {v: m for v, m in self._read.items() if v >= version}


def version_changes(cache: ManifestCache, version: int, columns: Sequence[str]) -> VersionChanges:
    """The planned change rows of ``version`` for ``columns`` (version 1: every row inserted).

    Raises:
        VersionNotFoundError: the version or the one before it does not exist.
        SchemaError: the version drops, renames or retypes one of ``columns``.
    """
    current, transaction = cache.get(version)
    if version <= 1:
        return all_inserted(current)
    previous, _ = cache.get(version - 1)
    return plan_version(cache.storage, previous, current, transaction, columns)


def table_changes(
    storage: Storage,
    starting_version: int,
    ending_version: int,
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
) -> pa.RecordBatchReader:
    """The change rows of versions ``starting_version`` to ``ending_version`` (both included), in
    version order: ``columns`` (default: all of the starting version's) then
    :data:`CHANGE_FIELDS`. Streams: each version is planned when reached, and pieces are read in
    batches of at most ``batch_size`` rows.

    Raises:
        VersionNotFoundError: a version of the range (or the one before it) does not exist.
        ScanOptionError: the range is empty or a version is below 1, or ``batch_size`` is below 1.
        SchemaError: a column is not in the starting version, or a version of the range drops,
            renames or retypes one.
    """
    from lance_table.errors import ScanOptionError

    if starting_version < 1 or ending_version < starting_version:
        raise ScanOptionError(
            f"starting_version ({starting_version}) must be at least 1 and at most ending_version "
            f"({ending_version})"
        )
    size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    if size < 1:
        raise ScanOptionError(f"batch_size must be positive, got {size}")
    cache = ManifestCache(storage)
    first, _ = cache.get(starting_version)
    cache.get(ending_version)  # fails now, not after streaming, when the range ends too far
    data = arrow_schema_from_fields(first.fields, first.schema_metadata)
    names = list(data.names if columns is None else columns)
    missing = [c for c in names if c not in data.names]
    if missing:
        raise SchemaError(
            f"columns {missing} are not in version {starting_version}; columns are {data.names}"
        )
    schema = pa.schema([*(data.field(c) for c in names), *CHANGE_FIELDS])

    def batches() -> Iterator[pa.RecordBatch]:
        for version in range(starting_version, ending_version + 1):
            planned = version_changes(cache, version, names)
            cache.forget_before(version)
            for piece in planned.pieces:
                for batch in read_piece(storage, piece, names, batch_size=size, types=schema):
                    yield batch.cast(schema) if batch.schema != schema else batch

    return pa.RecordBatchReader.from_batches(schema, batches())
