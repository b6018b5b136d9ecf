"""Compaction by binary copy (pylance's ``compaction_mode="try_binary_copy"`` and
``"force_binary_copy"``): a bin's data files are concatenated page by page
(:mod:`lance_table.file.concat`), with no decoding and no encoding.

A bin is copied when, as in pylance, no fragment has a deletion file, each has one data file, of
the dataset's data format, with the same fields and columns as the others, a schema that is the
dataset's, and no global buffer but its descriptor; the files' column encodings must agree, and
no column holds blobs. A bin is split into files at inputs' ends as pylance splits it (see
:func:`copy_plan`). Otherwise :func:`copy_plan` says why, and the bin is re-encoded
(``try_binary_copy``) or the compaction fails (``force_binary_copy``).
"""

from __future__ import annotations

import contextlib

from lance_table.file.concat import ConcatInput, ConcatPlan, plan_concat, write_concat
from lance_table.file.container import FileVersion
from lance_table.file.reader import LanceFileReader
from lance_table.format import paths
from lance_table.format.manifest import DataFile, Fragment
from lance_table.table.operations.compaction_bins import _Bin
from lance_table.table.progress import SILENT, Reporter
from lance_table.table.snapshot import Snapshot

#: pylance's compaction modes (``reencode`` is the default)
COMPACTION_MODES = ("reencode", "try_binary_copy", "force_binary_copy")


def _field_facts(fields: object) -> list[tuple[object, ...]]:
    return [(f.id, f.parent_id, f.name, f.logical_type, f.nullable) for f in fields]  # type: ignore[attr-defined]


def _inputs(ds: Snapshot, bin_: _Bin) -> list[ConcatInput] | str:
    """The bin's data files as inputs of a concatenation, or why they cannot be copied."""
    if ds.manifest.data_storage_version not in ("2.0", "2.1", "2.2"):
        return f"data format {ds.manifest.data_storage_version}"
    if ds.manifest.dictionaries:
        return "the dataset has dictionary fields"
    version = FileVersion.parse(ds.manifest.data_storage_version).manifest_version
    first: DataFile | None = None
    inputs = []
    for frag in bin_.fragments:
        f = frag.fragment
        if f.deletion_file is not None:
            return f"fragment {f.id} has a deletion file"
        if len(f.files) != 1:
            return f"fragment {f.id} has {len(f.files)} data files"
        data_file = f.files[0]
        if (data_file.file_major_version, data_file.file_minor_version) != version:
            return f"fragment {f.id} has a {data_file.version} data file"
        if first is None:
            first = data_file
        elif data_file.fields != first.fields or data_file.column_indices != first.column_indices:
            return (
                f"fragment {f.id} has other fields or columns than fragment {bin_.fragments[0].fragment.id}"
            )
        reader = frag._reader(data_file)
        assert isinstance(reader, LanceFileReader)
        frag.physical_rows  # noqa: B018 - checks the file's rows against the manifest's
        inputs.append(ConcatInput(reader.metadata, reader.read_span))
    if not inputs:
        return "no fragments"
    if _field_facts(inputs[0].meta.fields) != _field_facts(ds.manifest.fields):
        return f"the schema of {inputs[0].meta.path} is not the dataset's"
    return inputs


def copy_plan(ds: Snapshot, bin_: _Bin, target_rows: int, max_bytes: int) -> list[ConcatPlan] | str:
    """The data files of the bin's fragments to write by binary copy, as concatenations of the
    inputs, or why the bin cannot be copied. As in pylance, the bin's rows are split into as many
    files as they hold ``target_rows`` (at least one): a file ends after the input that takes it
    to ``target_rows`` rows, but for the last one, or to ``max_bytes`` bytes.

    Raises:
        CorruptFileError: a data file is damaged.
    """
    found = _inputs(ds, bin_)
    if isinstance(found, str):
        return found
    # pylance's split: as many files as the bin's rows hold targets (at least one); each but the
    # last ends after the input that takes it to the target, the last takes the rest
    files = max(1, sum(item.meta.num_rows for item in found) // target_rows)
    groups: list[list[ConcatInput]] = [[]]
    size = rows = 0
    for item in found:
        if size >= max_bytes or (rows >= target_rows and len(groups) < files):
            groups.append([])
            size = rows = 0
        groups[-1].append(item)
        size += item.meta.size
        rows += item.meta.num_rows
    plans = []
    for group in groups:
        plan = plan_concat(group)
        if isinstance(plan, str):
            return plan
        plans.append(plan)
    return plans


def copy_bin(
    ds: Snapshot,
    bin_: _Bin,
    plans: list[ConcatPlan],
    read_batch_bytes: int,
    report: Reporter = SILENT,
    write_tag: str = "",
) -> tuple[list[Fragment], list[str]]:
    """Write the data files ``plans`` (:func:`copy_plan` of ``bin_``): returns the new fragments
    (ids not yet assigned) and the files written; a failure deletes them."""
    template = bin_.fragments[0].fragment.files[0]
    fragments: list[Fragment] = []
    written: list[str] = []
    try:
        for plan in plans:
            name = paths.new_data_file_name(write_tag)
            path = paths.data_file_path(name)
            written.append(path)
            report.file_started(name, template.file_major_version, template.file_minor_version)
            with ds.storage.open_writer(path) as out:
                result = write_concat(plan, out, read_batch_bytes)
            data_file = DataFile(
                path=name,
                fields=template.fields,
                column_indices=template.column_indices,
                file_major_version=template.file_major_version,
                file_minor_version=template.file_minor_version,
                file_size_bytes=result.size,
            )
            fragment = Fragment(id=0, files=(data_file,), physical_rows=result.num_rows)
            report.advance(result.num_rows)
            report.file_written(fragment)
            fragments.append(fragment)
    except BaseException:
        for p in written:
            with contextlib.suppress(OSError):
                ds.storage.delete(p)
        raise
    return fragments, written
