"""Reading legacy Lance data files (format 0.1): whole, by column, by row range, by row indices, or
as a stream, with the same interface as :class:`~lance_table.file.reader.LanceFileReader`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import IO

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError, SchemaError, UnsupportedFormatError
from lance_table.file.arrow_take import filter_rows
from lance_table.file.legacy.container import (
    LEGACY_FORMAT_VERSION,
    LegacyMetadata,
    PageTable,
    arrow_schema,
    read_legacy_metadata,
    read_page_table,
)
from lance_table.file.legacy.decode import (
    Gen,
    PageContext,
    dictionary_gen,
    drive,
    field_gen,
    fixed_pages,
    fixed_pages_gen,
    gather,
    is_var_binary,
    var_binary_pages_gen,
)
from lance_table.file.legacy.stats import PageStatistics, read_statistics
from lance_table.file.rows import RowReader, decoding
from lance_table.file.runs import Runs, read_as_span
from lance_table.schema import FieldNode, build_tree
from lance_table.storage.sources import ByteSource, open_source


@dataclass(frozen=True)
class LegacyReaderMetadata:
    """The parsed tail of a legacy file together with the field tree it is read with."""

    file: LegacyMetadata
    roots: list[FieldNode]

    @cached_property
    def roots_by_id(self) -> dict[int, FieldNode]:
        """The top-level fields by field id."""
        return {n.id: n for n in self.roots}

    @property
    def num_rows(self) -> int:
        return self.file.num_rows

    @property
    def num_batches(self) -> int:
        return self.file.num_batches

    @property
    def batch_offsets(self) -> np.ndarray:
        """Cumulative row counts ``[0, n0, n0 + n1, ...]`` of the file's batches."""
        return self.file.batch_offsets


class LegacyFileReader(RowReader):
    """Reads one legacy Lance data file (format 0.1, footer 0.2).

    Only the bytes a request needs are fetched: the file tail and the page table when opening, then
    the pages of the projected columns in the batches the rows fall in, and within pages the byte
    ranges of the selected rows (for strings: their positions first, then their bytes).

    Values read exactly as pylance 14 reads them: the format stores no validity, so a null written to
    a number reads back as 0, to a bool as False, to a list as ``[]``, a struct is never null, and a
    zero-length string or binary reads as null on a nullable field (``""`` on a non-nullable one).

    Args:
        source: a local path, a seekable binary file object, the file's bytes or a ``ByteSource``.
        fields: the field tree to read the file with (the dataset schema, with the manifest's field
            ids). Default: the schema copy inside the file.
        field_ids: the ids the file's page table covers (the manifest's ``DataFile.fields``); by
            default those of the in-file schema copy, else those of ``fields``.
        dictionaries: values of dictionary fields by field id (a legacy dataset manifest's): they
            take precedence over the values the file locates itself, as pylance reads a dataset's
            files with its manifest's values. The file's own values serve the other fields.
        schema_metadata: the schema metadata to report; default: the in-file copy's.

    Raises:
        CorruptFileError: the file is damaged or not a Lance file.
        UnsupportedFormatError: the file is not a legacy file, or has no schema and none was given.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | IO[bytes] | ByteSource | bytes,
        fields: Sequence[FieldNode] | None = None,
        *,
        field_ids: Sequence[int] | None = None,
        dictionaries: Mapping[int, pa.Array] | None = None,
        schema_metadata: Mapping[str, bytes] | None = None,
    ) -> None:
        self._source = open_source(source)
        self._given_dicts = dict(dictionaries or {})
        self._dicts: dict[int, pa.Array] = {}
        self._stats: PageStatistics | None = None
        self._stats_read = False
        with decoding(self._source.name):
            self._open(fields, field_ids, schema_metadata)

    def _open(
        self,
        fields: Sequence[FieldNode] | None,
        field_ids: Sequence[int] | None,
        schema_metadata: Mapping[str, bytes] | None,
    ) -> None:
        path = self._source.name
        meta = read_legacy_metadata(self._source)
        if fields is not None:
            roots = list(fields)
        elif meta.has_schema:
            roots = build_tree(meta.fields)
        else:
            raise UnsupportedFormatError(
                "legacy file has no schema copy (manifest_position is 0); pass the dataset's fields",
                path=path,
            )
        if field_ids is not None:
            ids = [int(i) for i in field_ids]
        elif meta.has_schema:
            ids = [f.id for f in meta.fields]
        else:
            ids = [n.id for r in roots for n in r.walk()]
        self._page_table = read_page_table(
            self._source, meta, meta.page_table_position, ids, meta.num_batches, "page table"
        )
        self._meta = LegacyReaderMetadata(meta, roots)
        md = dict(schema_metadata) if schema_metadata is not None else meta.schema_metadata
        self._schema = arrow_schema(roots, md)
        self._ctx = PageContext(path, self._page_table, meta.metadata_position, self._dictionary)

    # -- metadata -------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._source.name

    @property
    def source(self) -> ByteSource:
        """The byte source the file is read through."""
        return self._source

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema, with field and schema metadata."""
        return self._schema

    @property
    def num_rows(self) -> int:
        return self._meta.num_rows

    @property
    def version(self) -> str:
        """The file format version as manifests and pylance name it: ``"0.1"``."""
        return LEGACY_FORMAT_VERSION

    @property
    def metadata(self) -> LegacyReaderMetadata:
        return self._meta

    @property
    def page_table(self) -> PageTable:
        return self._page_table

    def statistics(self) -> PageStatistics | None:
        """The file's page statistics (per batch null count, min and max of each eligible field),
        or None when the file has none. Read on first use, then kept.

        Statistics of a field the reader's schema does not hold with the statistics' type are left
        out: they cannot describe its values.

        Raises:
            CorruptFileError: the statistics are damaged.
        """
        if not self._stats_read:
            with decoding(self.path):
                stats = read_statistics(self._source, self._meta.file)
            if stats is not None:
                types = {n.id: n.arrow_type for r in self._meta.roots for n in r.walk()}
                fields = {fid: fs for fid, fs in stats.fields.items() if types.get(fid) == fs.min_value.type}
                stats = replace(stats, fields=fields)
            self._stats = stats
            self._stats_read = True
        return self._stats

    # -- reads ----------------------------------------------------------------------------------

    # -- internals ------------------------------------------------------------------------------

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[memoryview]:
        """Fetch byte ranges of the file (coalesced by the source)."""
        return self._source.read_ranges(ranges) if ranges else []

    def _project(self, columns: Sequence[str] | None) -> tuple[list[FieldNode], pa.Schema]:
        roots = self._meta.roots
        if columns is None:
            return roots, self._schema
        if isinstance(columns, str):
            raise TypeError("columns must be a list of names, not a string")
        by_name = {n.name: n for n in roots}
        nodes = []
        for name in columns:
            if name not in by_name:
                raise SchemaError(f"column {name!r} is not in {self.path}; columns are {list(by_name)}")
            nodes.append(by_name[name])
        fields = [self._schema.field(self._schema.get_field_index(n.name)) for n in nodes]
        return nodes, pa.schema(fields, metadata=self._schema.metadata)

    def _read(
        self, runs: Runs, columns: Sequence[str] | None, floors: Mapping[str, int] | None = None
    ) -> pa.Table:
        # (``floors`` go unused: a legacy file's page statistics prune pages before reads)
        nodes, schema = self._project(columns)
        with decoding(self.path):
            lo = int(runs.starts[0]) if runs.count else 0
            span = runs.end - lo
            if read_as_span(runs):
                # Many short runs close together: read the covering span, select in memory
                # (column by column: one filter of a table costs more than those of its columns).
                whole = self._read_runs(Runs.span(lo, span), nodes, schema)
                keep = pa.array(runs.mask(lo, span))
                return pa.Table.from_arrays(
                    [filter_rows(c, keep) for c in whole.columns], schema=whole.schema
                )
            return self._read_runs(runs, nodes, schema)

    def _read_runs(self, runs: Runs, nodes: list[FieldNode], schema: pa.Schema) -> pa.Table:
        offsets = self._meta.batch_offsets
        pieces: list[tuple[int, Runs, int]] = []
        if runs.count and nodes:
            first = int(np.searchsorted(offsets, runs.starts[0], side="right")) - 1
            last = int(np.searchsorted(offsets, runs.end - 1, side="right")) - 1
            for b in range(max(first, 0), min(last, self._meta.num_batches - 1) + 1):
                lo, hi = int(offsets[b]), int(offsets[b + 1])
                local = runs.clip(lo, hi)
                if local.count:
                    pieces.append((b, local, hi - lo))
        # a string or fixed-width field of many pages is decoded by one generator for all of them
        # (a page holds 1024 rows: the work of each page, one by one, costs more than its bytes)
        gens: list[Gen] = []
        owners: list[tuple[int, bool]] = []  # (node, whether the generator makes a list of arrays)
        for i, n in enumerate(nodes):
            if len(pieces) > 1 and is_var_binary(n.arrow_type):
                gens.append(var_binary_pages_gen(self._ctx, n, pieces))
                owners.append((i, True))
            elif len(pieces) > 1 and fixed_pages(n.arrow_type):
                gens.append(fixed_pages_gen(self._ctx, n, pieces))
                owners.append((i, True))
            else:
                gens.extend(field_gen(self._ctx, n, b, local, rows) for b, local, rows in pieces)
                owners.extend((i, False) for _ in pieces)
        results: list = drive(gather(gens), self.read_ranges) if gens else []
        chunks: list[list[pa.Array]] = [[] for _ in nodes]
        for (i, many), got in zip(owners, results):
            if many:
                chunks[i].extend(got)
            else:
                chunks[i].append(got)
        arrays = [pa.chunked_array(chunks[i], type=n.arrow_type) for i, n in enumerate(nodes)]
        return pa.Table.from_arrays(arrays, schema=schema)

    def _dictionary(self, node: FieldNode) -> pa.Array:
        values = self._dicts.get(node.id)
        if values is not None:
            return values
        where = self._meta.file.dictionaries.get(node.id)
        if node.id in self._given_dicts:
            values = self._given_dicts[node.id]
        elif where is not None:
            values = drive(dictionary_gen(self._ctx, node, *where), self.read_ranges)
        else:
            raise UnsupportedFormatError(
                f"dictionary field {node.name!r} (id {node.id}): the file does not locate its values "
                "and none were given",
                path=self.path,
            )
        assert values is not None
        want = node.arrow_type.value_type
        if values.type != want:
            raise CorruptFileError(self.path, f"dictionary of {node.name!r} holds {values.type}, not {want}")
        self._dicts[node.id] = values
        return values
