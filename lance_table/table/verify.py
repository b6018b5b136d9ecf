"""Checking that a version's files are all there and agree with its manifest (``lance-table verify``).

:func:`verify` reads every file one version references and reports each disagreement as a
:class:`Problem` instead of stopping at the first one, so that a damaged dataset can be surveyed in
one run:

- fragment ids are unique; no fragment deletes more rows than it holds;
- every data file exists; its size is the one the manifest records; its footer reads, holds the
  fragment's physical rows, is of the format the manifest records and has the columns the manifest
  points at;
- every deletion file exists, decodes, and holds exactly the manifest's count of distinct offsets,
  all below the fragment's physical rows;
- every index's files exist with the sizes the manifest records (an index without a file list needs
  a non-empty directory); the fragment reuse index's details file, when it has one, reads;
- the version's transaction file exists.

Files that live in another base path (``base_id``) are counted as skipped, not read.
"""

from __future__ import annotations

import os
import uuid as uuid_mod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_table._parallel import METADATA, map_on
from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file.container import read_metadata
from lance_table.file.legacy.container import read_legacy_metadata
from lance_table.format import paths
from lance_table.format.manifest import LEGACY_DATA_FORMAT, DataFile, Fragment, Manifest
from lance_table.storage import Storage
from lance_table.table.deletion import decode_deletions
from lance_table.table.frag_reuse import load_versions
from lance_table.table.handle import Handle
from lance_table.table.indices import FRAG_REUSE_INDEX_NAME, SYSTEM_INDEX_NAMES, decode_section
from lance_table.table.snapshot import Snapshot

#: The kinds of :class:`Problem`, by what they concern.
KINDS = ("fragment", "data", "deletion", "index", "transaction")


@dataclass(frozen=True)
class Problem:
    """One disagreement between a version's manifest and its files.

    Attributes:
        kind: what it concerns: ``"fragment"``, ``"data"``, ``"deletion"``, ``"index"`` or
            ``"transaction"``.
        path: the file (relative to the dataset root), or ``""`` for a fragment-level problem.
        message: what is wrong, naming the fragment where one is concerned.
    """

    kind: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` found for one version.

    Attributes:
        uri: the dataset.
        version: the version checked.
        problems: every problem found, fragments in manifest order, then indices, then the
            transaction file; empty when the version is sound.
        checked: files read or checked, by kind (``data``, ``deletion``, ``index``, ``transaction``).
        skipped: files not checked because they live in another base path, by kind.
    """

    uri: str
    version: int
    problems: tuple[Problem, ...]
    checked: Mapping[str, int] = field(default_factory=dict)
    skipped: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems


def verify(
    dataset: Handle | Snapshot | str | os.PathLike[str],
    *,
    version: int | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> VerifyReport:
    """Check that every file a version references exists and agrees with its manifest (see the
    module's description for the checks), collecting every problem.

    Args:
        dataset: an open dataset (its version is checked), a snapshot, or a URI.
        version: with a URI: the version number or tag to check (default: the latest).
        storage_options: with a URI: the options of its storage.

    Returns:
        The report; ``report.ok`` is False when problems were found.

    Raises:
        DatasetNotFoundError: there is no dataset at the URI.
        VersionNotFoundError: the version does not exist.
        TagError: the tag does not exist.
        StorageUnreachableError: the storage cannot be reached.
    """
    snapshot = _snapshot(dataset, version, storage_options)
    storage, manifest = snapshot.storage, snapshot.manifest
    problems: list[Problem] = list(_fragment_problems(manifest))
    checked = dict.fromkeys(("data", "deletion", "index", "transaction"), 0)
    skipped = dict.fromkeys(("data", "deletion", "index"), 0)

    def one(frag: Fragment) -> tuple[list[Problem], int, int, int, int]:
        found: list[Problem] = []
        own = [f for f in frag.files if f.base_id is None]
        for data_file in own:
            found += _data_file_problems(storage, frag, data_file)
        df = frag.deletion_file
        deletions = int(df is not None and df.base_id is None)
        if deletions:
            found += _deletion_problems(storage, frag)
        elsewhere = int(df is not None and df.base_id is not None)
        return found, len(own), deletions, len(frag.files) - len(own), elsewhere

    for found, data_n, del_n, data_skip, del_skip in map_on(METADATA, one, manifest.fragments):
        problems += found
        checked["data"] += data_n
        checked["deletion"] += del_n
        skipped["data"] += data_skip
        skipped["deletion"] += del_skip
    index_problems, index_checked, index_skipped = _index_problems(storage, manifest)
    problems += index_problems
    checked["index"] += index_checked
    skipped["index"] += index_skipped
    if manifest.transaction_file:
        checked["transaction"] += 1
        path = paths.transaction_path(manifest.transaction_file)
        if not storage.exists(path):
            problems.append(Problem("transaction", path, "missing (the manifest names it)"))
    return VerifyReport(snapshot.uri, snapshot.version, tuple(problems), checked, skipped)


def _snapshot(
    dataset: Handle | Snapshot | str | os.PathLike[str],
    version: int | str | None,
    storage_options: Mapping[str, Any] | None,
) -> Snapshot:
    if isinstance(dataset, Snapshot):
        return dataset
    if isinstance(dataset, (str, os.PathLike)):
        from lance_table.table.opening import open_snapshot

        return open_snapshot(dataset, version, storage_options=storage_options)
    return dataset._snapshot


def _fragment_problems(manifest: Manifest) -> list[Problem]:
    out = []
    seen: set[int] = set()
    for frag in manifest.fragments:
        if frag.id in seen:
            out.append(Problem("fragment", "", f"fragment id {frag.id} is used by more than one fragment"))
        seen.add(frag.id)
        if frag.num_deleted > frag.physical_rows:
            out.append(
                Problem(
                    "fragment",
                    "",
                    f"fragment {frag.id} deletes {frag.num_deleted} rows of its {frag.physical_rows}",
                )
            )
        if not frag.files:
            out.append(Problem("fragment", "", f"fragment {frag.id} has no data file"))
    if manifest.max_fragment_id is not None and seen and max(seen) > manifest.max_fragment_id:
        out.append(
            Problem(
                "fragment", "", f"fragment id {max(seen)} exceeds max_fragment_id {manifest.max_fragment_id}"
            )
        )
    return out


def _data_file_problems(storage: Storage, frag: Fragment, data_file: DataFile) -> list[Problem]:
    path = paths.data_file_path(data_file.path)
    try:
        size = storage.size(path)
    except FileNotFoundError:
        return [Problem("data", path, f"missing (data file of fragment {frag.id})")]
    out = []
    if data_file.file_size_bytes is not None and size != data_file.file_size_bytes:
        out.append(
            Problem("data", path, f"has {size} bytes, the manifest records {data_file.file_size_bytes}")
        )
    try:
        source = storage.source(path, size)
        if data_file.version == LEGACY_DATA_FORMAT:
            rows = read_legacy_metadata(source).num_rows
        else:
            meta = read_metadata(source)
            meta.columns.parse_all()
            rows = meta.num_rows
            if meta.version.value != data_file.version:
                out.append(
                    Problem(
                        "data",
                        path,
                        f"is format {meta.version.value}, the manifest records {data_file.version}",
                    )
                )
            beyond = [c for c in data_file.column_indices if c >= len(meta.columns)]
            if beyond:
                out.append(
                    Problem(
                        "data",
                        path,
                        f"has {len(meta.columns)} columns, the manifest points at column {max(beyond)}",
                    )
                )
    except (CorruptFileError, UnsupportedFormatError) as exc:
        problem = exc.problem if isinstance(exc, CorruptFileError) else str(exc)
        return [*out, Problem("data", path, f"footer does not read: {problem}")]
    except FileNotFoundError:
        return [Problem("data", path, f"missing (data file of fragment {frag.id})")]
    if rows != frag.physical_rows:
        out.append(
            Problem(
                "data", path, f"holds {rows} rows, fragment {frag.id} has {frag.physical_rows} physical rows"
            )
        )
    return out


def _deletion_problems(storage: Storage, frag: Fragment) -> list[Problem]:
    assert frag.deletion_file is not None
    path = frag.deletion_file.path(frag.id)
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return [Problem("deletion", path, f"missing (deletion file of fragment {frag.id})")]
    try:
        decode_deletions(data, frag, path, f"the manifest (fragment {frag.id})")
    except CorruptFileError as exc:
        return [Problem("deletion", path, exc.problem)]
    return []


def _index_problems(storage: Storage, manifest: Manifest) -> tuple[list[Problem], int, int]:
    out: list[Problem] = []
    checked = skipped = 0
    for idx in decode_section(manifest.index_section):
        directory = f"{paths.INDICES_DIR}/{uuid_mod.UUID(bytes=idx.uuid.uuid)}"
        if idx.HasField("base_id"):
            skipped += 1
            continue
        if idx.name == FRAG_REUSE_INDEX_NAME:
            checked += 1
            try:
                load_versions(storage, idx)
            except FileNotFoundError:
                out.append(Problem("index", directory, f"details file of index {idx.name!r} is missing"))
            except CorruptFileError as exc:
                out.append(Problem("index", directory, f"index {idx.name!r}: {exc.problem}"))
            continue
        if idx.name in SYSTEM_INDEX_NAMES:
            continue
        if idx.files:
            for f in idx.files:
                checked += 1
                path = f"{directory}/{f.path}"
                try:
                    size = storage.size(path)
                except FileNotFoundError:
                    out.append(Problem("index", path, f"missing (file of index {idx.name!r})"))
                    continue
                if f.size_bytes and size != f.size_bytes:
                    out.append(
                        Problem("index", path, f"has {size} bytes, the manifest records {f.size_bytes}")
                    )
        else:
            checked += 1
            if not storage.list_names(directory):
                out.append(
                    Problem("index", directory, f"directory of index {idx.name!r} is missing or empty")
                )
    return out, checked, skipped


__all__ = ["KINDS", "Problem", "VerifyReport", "verify"]
