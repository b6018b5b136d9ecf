"""Writes to multi-base datasets (pylance's ``initial_bases``, ``target_bases``,
``target_all_bases`` and ``add_bases``): which base paths a write registers, and where its new
data files go.

As in pylance:

- only the creation of a dataset registers bases (``initial_bases``; an append or overwrite of an
  existing dataset refuses them, an append or overwrite that creates the dataset takes them);
  ``add_bases`` registers more later, in an ``UpdateBases`` commit;
- a base not given an id gets the next free one, from one above the highest registered;
- ``target_bases`` references are base names first, then base paths exactly as registered, then
  the dataset's own URI (its own directory); new data files rotate over them, one file each, in
  the order given;
- ``target_all_bases`` rotates over every registered base by id, the dataset's own directory first
  when it is True; it cannot be combined with ``target_bases``;
- without targets, new files go to the dataset's own ``data/``, whatever bases the dataset has;
- a data file's blob v2 sidecars go next to it, in its base (``<stem>/<id>.blob``): descriptors
  name the sidecar, never the base.

Where pylance accepts bases that collide when a dataset is created (two bases with one name or one
path, which makes ``target_bases`` resolve arbitrarily), lance_table refuses them with
:class:`~lance_table.errors.BasePathError`, as pylance's ``add_bases`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lance_table.errors import BasePathError
from lance_table.format.bases import DatasetBasePath, base_paths, register
from lance_table.format.manifest import Manifest
from lance_table.format.transaction import UpdateBases
from lance_table.storage import Storage
from lance_table.table import versions
from lance_table.table.base_storage import base_storage, data_dir
from lance_table.table.commit import Pending, commit
from lance_table.table.snapshot import Snapshot


@dataclass(frozen=True)
class WriteTarget:
    """Where a new data file goes: a storage, the directory in it ("" for its top), and the base id
    the data file records (None: the dataset's own ``data/``)."""

    storage: Storage
    directory: str
    base_id: int | None

    def path(self, name: str) -> str:
        """The path of data file ``name`` in :attr:`storage`."""
        return f"{self.directory}/{name}" if self.directory else name


@dataclass(frozen=True)
class BasePlan:
    """What a write does with base paths.

    Attributes:
        initial: the bases a new dataset registers, ids assigned (its Overwrite records them).
        targets: the base ids new data files rotate over (None: the dataset's own directory);
            empty: every file in the dataset's own directory.
        bases: every base registered once the write commits, by id.
    """

    initial: tuple[DatasetBasePath, ...] = ()
    targets: tuple[int | None, ...] = ()
    bases: Mapping[int, DatasetBasePath] | None = None

    def open(self, storage: Storage) -> list[WriteTarget]:
        """The targets, opened (a base's storage with the dataset's storage options)."""
        bases = dict(self.bases or {})
        out = []
        for base_id in self.targets:
            if base_id is None:
                out.append(WriteTarget(storage, data_dir(bases, None), None))
            else:
                where = base_storage(storage, bases, base_id, f"base path {base_id}")
                out.append(WriteTarget(where, data_dir(bases, base_id), base_id))
        return out


NO_BASES = BasePlan()


def as_base_path(value: Any, what: str) -> DatasetBasePath:
    """``value`` (lance_table's or pylance's ``DatasetBasePath``) as lance_table's.

    Raises:
        TypeError: ``value`` is not a base path (pylance raises ValueError for ``initial_bases``:
            :func:`plan_bases` raises a BasePathError, also a ValueError, there).
    """
    if isinstance(value, DatasetBasePath):
        return value
    pylance_like = all(hasattr(value, a) for a in ("path", "name", "is_dataset_root", "id"))
    if pylance_like and not isinstance(value, str):
        return DatasetBasePath(value.path, value.name, value.is_dataset_root, value.id or None)
    raise TypeError(f"{what} must contain DatasetBasePath objects only, got {type(value).__name__}")


def plan_bases(
    manifest: Manifest | None,
    mode: str,
    initial_bases: Sequence[Any] | None,
    target_bases: Sequence[str] | None,
    target_all_bases: bool | None,
    *,
    uri: str = "",
) -> BasePlan:
    """What a write with these options does with base paths, on top of ``manifest`` (None: the
    write creates the dataset at ``uri``; a ``target_bases`` reference equal to ``uri`` is the
    dataset's own directory).

    Raises:
        BasePathError: ``initial_bases`` for an existing dataset, bases that collide, a
            ``target_bases`` reference that names no base, ``target_all_bases`` with
            ``target_bases`` or with no base to write to, or something else than base paths.
        TypeError: a ``target_bases`` entry is not a string.
    """
    if not initial_bases and target_bases is None and target_all_bases is None:
        return NO_BASES
    existing = base_paths(manifest) if manifest is not None else {}
    initial: tuple[DatasetBasePath, ...] = ()
    if initial_bases:
        if manifest is not None:
            raise BasePathError(
                f"Cannot register new bases in {mode.capitalize()} mode. Only CREATE mode can register "
                "new bases (add them to an existing dataset with add_bases)",
                reference=getattr(initial_bases[0], "name", None) or getattr(initial_bases[0], "path", None),
            )
        try:
            given = [as_base_path(b, "initial_bases") for b in initial_bases]
        except TypeError as exc:
            raise BasePathError(str(exc)) from None
        registered = register({}, given)
        initial = tuple(registered[i] for i in sorted(registered))
    bases = {**existing, **{b.id: b for b in initial}}
    if target_all_bases is not None:
        if target_bases is not None:
            raise BasePathError(
                "Cannot specify target_all_bases together with target_bases", reference="target_all_bases"
            )
        targets: tuple[int | None, ...] = (*([None] if target_all_bases else []), *sorted(bases))
        if not targets:
            raise BasePathError(
                "target_all_bases=False found no registered bases to write to; register bases or "
                "include the dataset's own directory (target_all_bases=True)",
                reference="target_all_bases",
            )
    else:
        targets = tuple(resolve(bases, ref, uri) for ref in target_bases or ())
    return BasePlan(initial, targets, bases)


def resolve(bases: Mapping[int, DatasetBasePath], reference: str, uri: str = "") -> int | None:
    """The id of the base ``reference`` names: a base name first, else a base path as registered,
    else None when it is the dataset's own ``uri`` (a trailing slash aside).

    Raises:
        TypeError: ``reference`` is not a string.
        BasePathError: no base has that name or path.
    """
    if not isinstance(reference, str):
        raise TypeError(f"target_bases entries must be str, got {type(reference).__name__}")
    for key in ("name", "path"):
        for base_id in sorted(bases):
            if getattr(bases[base_id], key) == reference:
                return base_id
    if uri and reference.rstrip("/") == uri.rstrip("/"):
        return None
    known = ", ".join(repr(b.name or b.path) for b in bases.values()) or "none"
    raise BasePathError(
        f"Base reference {reference!r} not found in available bases (registered: {known})",
        reference=reference,
    )


def remove_written(targets: Sequence[WriteTarget], written: Iterable[tuple[int | None, str]]) -> None:
    """Delete files a failed write left in other bases (the commit removes the dataset's own)."""
    where = {t.base_id: t.storage for t in targets}
    for base_id, path in written:
        if base_id is not None and base_id in where:
            with contextlib.suppress(OSError):
                where[base_id].delete(path)


def add_bases(
    snapshot: Snapshot, new_bases: Sequence[Any], properties: Mapping[str, str] | None = None
) -> Snapshot:
    """Register ``new_bases`` in one ``UpdateBases`` commit (pylance's ``add_bases``; an empty list
    commits a version too, as in pylance); return the version committed.

    Raises:
        TypeError: ``new_bases`` holds something else than base paths.
        BasePathError: a new base's name, path or id collides with a registered base or another
            new one (checked again against the version the commit lands on).
        CommitConflictError: a concurrent commit makes this one impossible.
    """
    if isinstance(new_bases, (str, bytes)) or not isinstance(new_bases, Iterable):
        raise TypeError(f"new_bases must be a list of DatasetBasePath, got {type(new_bases).__name__}")
    given = tuple(as_base_path(b, "new_bases") for b in new_bases)
    versions.check_writable(snapshot.manifest, snapshot.uri)
    register(base_paths(snapshot.manifest), given)  # fail before anything is written
    manifest = commit(
        snapshot.storage,
        snapshot.manifest,
        Pending(UpdateBases(given), snapshot.version),
        options=snapshot.commit_options,
        properties=dict(properties or {}),
        scheme=snapshot.scheme,
    )
    return Snapshot(snapshot.storage, manifest, snapshot.scheme, snapshot.commit_options)
