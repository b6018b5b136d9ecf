"""One fragment of a dataset version, with pylance's ``LanceFragment`` basics: its id and metadata,
row counts and scans of its rows alone (what Ray, lance-ray and Daft split reads by)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds

from lance_table.errors import UnsupportedOperationError
from lance_table.format.manifest import Fragment
from lance_table.storage import open_storage
from lance_table.table import scanner as scans
from lance_table.table.fragment_metadata import DataFile, FragmentMetadata
from lance_table.table.fragment_session import FragmentSession, open_session
from lance_table.table.lance_schema import LanceSchema
from lance_table.table.maintenance import validate
from lance_table.table.opening import refuse
from lance_table.table.operations.delete import delete_in_fragment, delete_offsets_in_fragment
from lance_table.table.scan import Predicate
from lance_table.table.scan_spec import Columns, scan_spec
from lance_table.table.scanner import LanceScanner
from lance_table.table.snapshot import Snapshot


class LanceFragment(pds.Fragment):
    """A fragment of one dataset version (it never changes). Pickles as its version and id.

    A ``pyarrow.dataset.Fragment``, as pylance's is (its members are overridden: the Cython base's
    C++ fragment does not exist).

    Example:
        ```python
        frag = ds.get_fragments()[0]
        print(frag.fragment_id, frag.count_rows(), frag.metadata.files[0].path)
        frag.to_table(columns=["id"], filter="score > 0.5")
        ```
    """

    def __init__(
        self, dataset: Any, fragment_id: int | None = None, *, fragment: Fragment | None = None
    ) -> None:
        """The fragment ``fragment_id`` (or ``fragment``) of ``dataset``, a dataset handle (as
        pylance's ``LanceFragment(ds, 3)``) or a snapshot.

        Raises:
            ValueError: neither ``fragment_id`` nor ``fragment`` is given, or the version has no
                such fragment.
        """
        snapshot: Snapshot = dataset if isinstance(dataset, Snapshot) else dataset._snapshot
        if fragment is None:
            if fragment_id is None:
                raise ValueError("Either fragment or fragment_id must be specified")
            fragment = _fragment(snapshot, fragment_id)
        self._snapshot = snapshot
        self._fragment = fragment

    @staticmethod
    def create(
        dataset_uri: str | os.PathLike[str],
        data: Any,
        fragment_id: int | None = None,
        schema: pa.Schema | None = None,
        max_rows_per_group: int | None = 1024,
        progress: Any = None,
        mode: str = "append",
        *,
        data_storage_version: str | None = None,
        use_legacy_format: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
        namespace_client: Any = None,
        table_id: Sequence[str] | None = None,
        session: Any = None,
    ) -> FragmentMetadata:
        """Write ``data`` as one fragment of the dataset at ``dataset_uri`` without committing it
        (pylance's ``LanceFragment.create``); commit the metadata with ``LanceOperation.Append`` or
        ``Overwrite``. ``max_rows_per_group`` and ``session`` are accepted as no-ops; ``progress``
        as ``write_fragments``'s (a pylance ``FragmentWriteProgress`` sees ``fragment_id``).

        Raises:
            UnsupportedOptionError: ``namespace_client`` or ``table_id`` is set.
            ValueError: a bad ``fragment_id``, or no rows.
            SchemaError: (``mode="append"``) the data does not match the dataset's schema.
            InputTypeError: the data is of no kind a write takes, or ``progress`` of no kind
                taken (also a TypeError).
        """
        from lance_table.table.operations.stage import create_fragment

        refuse("LanceFragment.create", {"namespace_client": namespace_client, "table_id": table_id})
        if data_storage_version is None and use_legacy_format is not None:
            data_storage_version = "legacy" if use_legacy_format else "stable"
        storage = open_storage(dataset_uri, storage_options)
        frag = create_fragment(
            storage,
            data,
            fragment_id,
            schema,
            mode,  # type: ignore[arg-type]
            data_storage_version,
            progress,
        )
        return FragmentMetadata.from_fragment(frag)

    @staticmethod
    def create_from_file(filename: str, dataset: Any, fragment_id: int) -> FragmentMetadata:
        """The metadata of a fragment ``fragment_id`` made of the data file ``filename``, already in
        ``dataset``'s ``data/`` directory (written with the file API, say) with the dataset's
        schema; nothing is committed (commit with ``LanceOperation.Append`` or ``Rewrite``, which
        give it a fresh id, as in pylance).

        Raises:
            LanceFileNotFoundError: there is no such file (also a FileNotFoundError).
            AppendSchemaError: the file's schema is not the dataset's (also an OSError).
            UnsupportedFormatError: the file is not a Lance 2.x file.
        """
        from lance_table.table.operations.from_file import fragment_from_file

        return FragmentMetadata.from_fragment(fragment_from_file(dataset._snapshot, filename, fragment_id))

    def __repr__(self) -> str:
        files = [f.path for f in self._fragment.files]
        return f"LanceFragment(id={self.fragment_id}, data_files={files})"

    @property
    def fragment_id(self) -> int:
        """The fragment's id in the manifest."""
        return self._fragment.id

    @cached_property
    def metadata(self) -> FragmentMetadata:
        """The fragment's metadata, as pylance's ``FragmentMetadata`` (a copy each handle owns)."""
        return FragmentMetadata.from_fragment(self._fragment)

    @property
    def physical_rows(self) -> int:
        """Rows of the fragment, deleted ones included."""
        return self._fragment.physical_rows

    @property
    def num_deletions(self) -> int:
        """How many of the fragment's rows are deleted."""
        return self._fragment.num_deleted

    @property
    def schema(self) -> pa.Schema:
        """The schema of the dataset version (what the fragment's scans return)."""
        return self._snapshot.read_schema

    @property
    def physical_schema(self) -> pa.Schema:
        """The schema of the rows the fragment's scans return (pyarrow's ``Fragment`` member;
        pylance leaves it unimplemented)."""
        return self.schema

    @property
    def partition_expression(self) -> pc.Expression:
        """Not supported (as in pylance: a Lance dataset is not partitioned).

        Raises:
            UnsupportedOperationError: always (also a NotImplementedError, as pylance's).
        """
        raise UnsupportedOperationError("partition_expression: Lance fragments are not partitioned")

    def data_files(self) -> list[DataFile]:
        """The fragment's data files, as pylance's ``DataFile``."""
        return list(self.metadata.files)

    def deletion_file(self) -> str | None:
        """The deletion file's path relative to the dataset root, if the fragment has one."""
        d = self._fragment.deletion_file
        return None if d is None else d.path(self.fragment_id)

    def count_rows(self, filter: Predicate | None = None) -> int:
        """Rows that are not deleted (and match ``filter``, if given).

        Raises:
            FilterError: the filter does not parse.
        """
        if filter is None:
            return self._fragment.num_rows
        return self.scanner(filter=filter).count_rows()

    def scanner(
        self,
        *,
        columns: Columns = None,
        batch_size: int | None = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        **options: Any,
    ) -> LanceScanner:
        """A scanner over this fragment's rows alone; options as ``Dataset.scanner``'s
        (``_rowoffset`` is the row's position in the whole version, as in pylance).

        Raises:
            TypeError, ScanOptionError, UnsupportedOperationError: as ``Dataset.scanner``.
        """
        args = {**locals(), **options, "fragments": (self.fragment_id,)}
        return LanceScanner(self._snapshot, scan_spec(args, "LanceFragment.scanner"))

    def to_table(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        **options: Any,
    ) -> pa.Table:
        """The fragment's rows as one table (as ``Dataset.to_table`` over this fragment alone).

        Raises:
            SchemaError: a column does not exist.
            FilterError: the filter or a column expression does not parse.
        """
        args = {**locals(), **options, "fragments": (self.fragment_id,)}
        return LanceScanner(self._snapshot, scan_spec(args, "LanceFragment.to_table")).to_table()

    def to_pandas(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        batch_size: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        blob_mode: str = "lazy",
        order_by: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The fragment's rows as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``;
        ``blob_mode`` as ``Dataset.to_pandas``'s).

        Raises:
            UnsupportedOptionError: blob columns with ``blob_mode`` other than "descriptions";
                other errors as :meth:`to_table`.
        """
        args = {k: v for k, v in locals().items() if k not in ("self", "kwargs", "blob_mode", "__class__")}
        spec = scan_spec({**args, "fragments": (self.fragment_id,)}, "LanceFragment.to_pandas")
        return LanceScanner(self._snapshot, spec).to_pandas(blob_mode=blob_mode, **kwargs)

    def to_batches(self, **options: Any) -> Iterator[pa.RecordBatch]:
        """The fragment's rows in batches of at most ``batch_size`` rows (options as :meth:`scanner`).

        Raises:
            as :meth:`to_table`.
        """
        return self.scanner(**options).to_batches()

    def head(self, num_rows: int) -> pa.Table:
        """The fragment's first ``num_rows`` live rows."""
        return self.scanner(limit=num_rows).to_table()

    def take(self, indices: Any, columns: Columns = None) -> pa.Table:
        """Rows by position among the fragment's live rows, in the order given.

        Raises:
            IndexError: an index is outside ``[0, count_rows())``.
            SchemaError: a column does not exist.
        """
        spec = scan_spec({"columns": columns}, "LanceFragment.take")
        return scans.take(self._snapshot, indices, spec, [self.fragment_id])

    def open_session(self, columns: Columns = None, with_row_address: bool | None = None) -> FragmentSession:
        """A session for repeated :meth:`take` calls with one projection (``columns``, all when
        None; ``with_row_address`` adds ``_rowaddr``), as pylance's ``FragmentSession``.

        Raises:
            SchemaError: a column does not exist.
            FilterError: a column expression does not parse.
        """
        return open_session(self._snapshot, self.fragment_id, columns, with_row_address)

    def delete(self, predicate: Predicate) -> FragmentMetadata | None:
        """The fragment with the rows matching ``predicate`` deleted as well, or None when no row
        would be left: a new deletion file is written, nothing is committed (commit it with
        ``LanceOperation.Delete``, as in pylance).

        Raises:
            FilterError: the predicate does not parse.
        """
        fragment = delete_in_fragment(self._snapshot, self.fragment_id, predicate)
        return None if fragment is None else FragmentMetadata.from_fragment(fragment)

    def delete_rows(self, offsets: Iterable[int]) -> FragmentMetadata | None:
        """The fragment with the rows at these physical offsets (0-based, in this fragment)
        deleted as well, or None when no row would be left; nothing is committed (as
        :meth:`delete`, without a predicate: pylance's ``delete_rows``).

        Raises:
            IndexError: an offset lies outside the fragment.
        """
        fragment = delete_offsets_in_fragment(self._snapshot, self.fragment_id, offsets)
        return None if fragment is None else FragmentMetadata.from_fragment(fragment)

    def validate(self) -> None:
        """Check this fragment's integrity (its files there, its deletion count within its rows),
        as the dataset's ``validate()`` checks every fragment.

        Raises:
            SchemaError: the fragment deletes more rows than it has.
            DataFileNotFoundError: a data or deletion file is missing.
        """
        validate(self._snapshot, fragment_ids=(self.fragment_id,))

    def merge_columns(
        self,
        value_func: Any,
        columns: list[str] | None = None,
        batch_size: int | None = None,
        reader_schema: pa.Schema | None = None,
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """This fragment with new columns in a new data file (as ``Dataset.add_columns`` makes
        them: SQL expressions, a batch UDF reading ``columns``, or rows aligned with this
        fragment's), and the schema with the new fields; nothing is committed (commit with
        ``LanceOperation.Merge``, as in pylance).

        Raises:
            ValueError: the UDF has a checkpoint file.
            SchemaChangeError: a new column's name is taken; aligned data has another row count.
            FilterError: a SQL expression does not compile.
            TypeError: ``value_func`` is of no kind taken.
        """
        from lance_table.table.operations.schema_udf import merge_fragment_columns

        fragment, fields = merge_fragment_columns(
            self._snapshot, self.fragment_id, value_func, columns, batch_size, reader_schema
        )
        metadata = FragmentMetadata.from_fragment(fragment)
        return metadata, LanceSchema(fields, self._snapshot.manifest.schema_metadata)

    def merge(
        self, data_obj: Any, left_on: str, right_on: str | None = None, schema: pa.Schema | None = None
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """This fragment left-joined with the columns of ``data_obj`` where ``left_on`` (a column,
        ``_rowid`` or ``_rowaddr``) equals the data's ``right_on`` (default ``left_on``): the new
        columns go to a new data file (unmatched rows get nulls), and the schema with the new
        fields is returned; nothing is committed (commit with ``LanceOperation.Merge``, as in
        pylance).

        Raises:
            SchemaChangeError: a key column is missing, or a new column's name is taken.
            TypeError: ``data_obj`` is not reader-like.
        """
        from lance_table.table.operations.inputs import coerce_reader
        from lance_table.table.operations.schema_merge import merge_fragment

        reader = coerce_reader(data_obj, schema)
        key = left_on if right_on is None else right_on
        fragment, fields = merge_fragment(self._snapshot, self.fragment_id, reader, left_on, key)
        return FragmentMetadata.from_fragment(fragment), LanceSchema(
            fields, self._snapshot.manifest.schema_metadata
        )

    def update_columns(
        self,
        data_obj: Any,
        left_on: str = "_rowid",
        right_on: str | None = None,
        schema: pa.Schema | None = None,
        *,
        with_offsets: bool = False,
    ) -> tuple[FragmentMetadata, list[int]] | tuple[FragmentMetadata, list[int], bytes]:
        """This fragment with existing columns given new values: ``data_obj``'s columns (but its
        key ``right_on``, by default ``left_on``) replace the values of the rows whose ``left_on``
        (``_rowid`` by default) matches; other rows keep theirs (of several matching rows the last
        wins). The new values go to a new data file; nothing is committed (commit with
        ``LanceOperation.Update(updated_fragments=[...], fields_modified=...)``, as in pylance).

        Returns the new metadata and the ids of the fields rewritten, and with ``with_offsets``
        also the matched physical row offsets as a portable Roaring bitmap.

        Raises:
            SchemaError: a key column is missing; a column to update is ``_rowid``/``_rowaddr``,
                is not in the dataset or has another type there (also a ValueError).
            TypeError: ``data_obj`` is of no kind a write takes.
        """
        from lance_table.table.operations.update_columns import update_fragment_columns

        fragment, fields, offsets = update_fragment_columns(
            self._snapshot, self.fragment_id, data_obj, left_on, right_on, schema
        )
        metadata = FragmentMetadata.from_fragment(fragment)
        return (metadata, fields, offsets) if with_offsets else (metadata, fields)

    def __reduce__(self) -> tuple[Any, ...]:
        return _reopen, (self._snapshot, self.fragment_id)


def _reopen(snapshot: Snapshot, fragment_id: int) -> LanceFragment:
    return fragment_of(snapshot, fragment_id)


def fragment_of(snapshot: Snapshot, fragment_id: int) -> LanceFragment:
    """The fragment ``fragment_id`` of ``snapshot``.

    Raises:
        ValueError: the version has no such fragment.
    """
    return LanceFragment(snapshot, fragment=_fragment(snapshot, fragment_id))


def _fragment(snapshot: Snapshot, fragment_id: int) -> Fragment:
    for f in snapshot.manifest.fragments:
        if f.id == fragment_id:
            return f
    raise ValueError(f"fragment id does not exist: {fragment_id}")
