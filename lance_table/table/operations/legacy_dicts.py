"""Dictionary columns of legacy (0.1) datasets written by several writers at once.

Every legacy data file's dictionary keys index the one dictionary the dataset manifest holds (pylance
reads them with the manifest's values, not the file's copy). Writers that run in parallel (Spark
tasks) each start from the dataset's dictionary and extend it with the values their rows bring, each
in its own order. :func:`merge_written_parts` joins their results in order: a part whose dictionary
extends the joined one so far (or is a prefix of it) is kept as written; the files of any other part
are rewritten, streaming, with keys into the joined dictionary, which that rewrite extends in turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from lance_table.file.legacy.reader import LegacyFileReader
from lance_table.format import paths
from lance_table.format.dictionaries import extended
from lance_table.format.manifest import Fragment
from lance_table.schema import LanceField
from lance_table.storage.base import Storage
from lance_table.table.operations.write import LEGACY_FORMAT, FragmentWriter

REWRITE_BATCH_ROWS = 65536


@dataclass(frozen=True)
class WrittenPart:
    """What one writer produced: fragments (one file each), their files, and the dictionary values
    by field id that its files' keys index."""

    fragments: tuple[Fragment, ...]
    files: tuple[str, ...]
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict)


@dataclass(frozen=True)
class MergedParts:
    """The parts joined: fragments and files to commit, files no longer needed (replaced by a
    rewrite; delete them once the commit landed), and the dictionaries the files index."""

    fragments: tuple[Fragment, ...]
    files: tuple[str, ...]
    replaced: tuple[str, ...]
    dictionaries: dict[int, pa.Array]


def merge_written_parts(
    storage: Storage,
    schema: pa.Schema,
    fields: Sequence[LanceField],
    base: Mapping[int, pa.Array],
    parts: Sequence[WrittenPart],
    *,
    write_tag: str = "",
) -> MergedParts:
    """Join ``parts`` (in order) written on top of the dictionaries ``base``.

    Files a rewrite creates carry ``write_tag`` in their names; if the rewrite fails, they are
    deleted and the error is raised (the parts' own files are left to the caller).
    """
    joined: dict[int, pa.Array] = dict(base)
    fragments: list[Fragment] = []
    files: list[str] = []
    replaced: list[str] = []
    for part in parts:
        kept = extended(joined, part.dictionaries)
        if kept is not None:
            joined = kept
            fragments.extend(part.fragments)
            files.extend(part.files)
            continue
        writer = FragmentWriter(
            storage,
            schema,
            list(fields),
            max_rows_per_file=1 << 62,
            max_bytes_per_file=1 << 62,
            write_tag=write_tag,
            data_format=LEGACY_FORMAT,
            dictionaries=joined,
        )
        try:
            for fragment in part.fragments:
                # one file per fragment in, one out: the fragment boundaries stay as they were
                (data_file,) = fragment.files
                source = storage.source(paths.data_file_path(data_file.path))  # legacy: sizes are off
                reader = LegacyFileReader(source, field_ids=data_file.fields or None)
                for batch in reader.iter_batches(REWRITE_BATCH_ROWS):
                    writer.write(batch)
                writer.finish()
        except BaseException:
            writer.abort()
            raise
        fragments.extend(writer.fragments)
        files.extend(writer.paths)
        replaced.extend(part.files)
        joined = dict(writer.dictionaries)
    return MergedParts(tuple(fragments), tuple(files), tuple(replaced), joined)


__all__ = ["MergedParts", "WrittenPart", "merge_written_parts"]
