"""pylance's ``LanceOperation`` namespace and ``Transaction``: what a driver commits with
``Dataset.commit`` after workers wrote fragments (:func:`lance_table.fragment.write_fragments`).

The operations lance_table commits (``Overwrite``, ``Append``, ``Delete``, ``Rewrite``,
``Restore``, ``Merge``, ``Update``, ``Project``, ``UpdateConfig``, ``DataReplacement``) have
pylance 14's fields and defaults; the other names pylance has exist so that code naming them
imports, and committing one raises :class:`UnsupportedOperationError` naming it.
Fragment lists take this library's :class:`FragmentMetadata` or any object with pylance's
``to_json()`` (pylance's own metadata), converted on construction.
"""

from __future__ import annotations

import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_table.table.fragment_metadata import DataFile, FragmentMetadata


def _fragments(value: Any, what: str) -> list[FragmentMetadata]:
    """``value`` as a list of :class:`FragmentMetadata` (pylance's converted through its JSON).

    Raises:
        TypeError: not a list of fragment metadata (as pylance).
    """
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{what} must be list[FragmentMetadata], got {type(value)}")
    out = []
    for f in value:
        if isinstance(f, FragmentMetadata):
            out.append(f)
        elif hasattr(f, "to_json") and hasattr(f, "physical_rows"):
            out.append(FragmentMetadata.from_json(f.to_json()))
        else:
            raise TypeError(f"{what} must be list[FragmentMetadata], got {type(f)}")
    return out


class LanceOperation:
    """The operations :meth:`lance_table.Dataset.commit` applies (pylance's ``LanceOperation``).

    Example:
        ```python
        from lance_table.fragment import write_fragments

        metas = write_fragments(table, uri)  # on any worker: files, no commit
        ds = lt.LanceDataset.commit(uri, lt.LanceOperation.Append(metas), read_version=ds.version)
        ```
    """

    class BaseOperation:
        """Base of every operation."""

    @dataclass
    class Overwrite(BaseOperation):
        """Create a dataset, or replace every fragment and the schema of one.

        Attributes:
            new_schema: the Arrow schema of the new version (field ids are given in schema order,
                as ``write_fragments(mode="overwrite")`` gives them).
            fragments: the fragments of the new version (new ids are assigned on commit).
            initial_bases: base paths (:class:`~lance_table.DatasetBasePath`) a new dataset registers,
                as ``write_dataset(initial_bases=...)``; refused for an existing dataset.
        """

        new_schema: pa.Schema
        fragments: list[FragmentMetadata]
        initial_bases: list[Any] | None = None

        def __post_init__(self) -> None:
            self.fragments = _fragments(self.fragments, "fragments")

    @dataclass
    class Append(BaseOperation):
        """Add fragments (new ids are assigned on commit)."""

        fragments: list[FragmentMetadata]

        def __post_init__(self) -> None:
            self.fragments = _fragments(self.fragments, "fragments")

    @dataclass
    class Delete(BaseOperation):
        """Replace fragments by versions with new deletion files, and drop whole fragments.

        Attributes:
            updated_fragments: the fragments with their new deletion files (same ids).
            deleted_fragment_ids: ids of fragments all of whose rows are deleted.
            predicate: the SQL predicate that chose the rows (recorded in the transaction).
        """

        updated_fragments: list[FragmentMetadata]
        deleted_fragment_ids: list[int]
        predicate: str

        def __post_init__(self) -> None:
            self.updated_fragments = _fragments(self.updated_fragments, "updated_fragments")
            self.deleted_fragment_ids = [int(i) for i in self.deleted_fragment_ids]

    @dataclass
    class RewriteGroup:
        """Fragments replaced by new ones holding the same rows (new fragments with id 0 get
        new ids on commit)."""

        old_fragments: list[FragmentMetadata]
        new_fragments: list[FragmentMetadata]

        def __post_init__(self) -> None:
            self.old_fragments = _fragments(self.old_fragments, "old_fragments")
            self.new_fragments = _fragments(self.new_fragments, "new_fragments")

    @dataclass
    class Rewrite(BaseOperation):
        """Rewrite groups of fragments (compaction). ``rewritten_indices`` must be empty:
        lance_table does not write indices."""

        groups: list[LanceOperation.RewriteGroup]
        rewritten_indices: list[Any] = field(default_factory=list)

        def __post_init__(self) -> None:
            self.groups = [
                g
                if isinstance(g, LanceOperation.RewriteGroup)
                else LanceOperation.RewriteGroup(list(g.old_fragments), list(g.new_fragments))
                for g in self.groups
            ]

    @dataclass
    class Restore(BaseOperation):
        """Make an old version the latest again."""

        version: int

    @dataclass
    class Update(BaseOperation):
        """Rows rewritten: fragments removed, fragments with new deletion files (or data files),
        and new fragments holding the rewritten rows (new ids are assigned on commit).

        Attributes:
            removed_fragment_ids: fragments all of whose rows were rewritten.
            updated_fragments: fragments of the dataset with new deletion files (same ids).
            new_fragments: the fragments holding the new rows.
            fields_modified: ids of fields whose values changed in ``updated_fragments``.
            fields_for_preserving_frag_bitmap: fields whose indices keep covering moved rows (stable
                row ids), as in pylance.
            update_mode: ``"rewrite_rows"`` or ``"rewrite_columns"`` (``""``: rows).
            updated_fragment_offsets: accepted; only pylance's row-level version metadata uses it.
        """

        removed_fragment_ids: list[int] = field(default_factory=list)
        updated_fragments: list[FragmentMetadata] = field(default_factory=list)
        new_fragments: list[FragmentMetadata] = field(default_factory=list)
        fields_modified: list[int] = field(default_factory=list)
        fields_for_preserving_frag_bitmap: list[int] = field(default_factory=list)
        update_mode: str = ""
        updated_fragment_offsets: dict[int, bytes] | None = None

        def __post_init__(self) -> None:
            self.updated_fragments = _fragments(self.updated_fragments, "updated_fragments")
            self.new_fragments = _fragments(self.new_fragments, "new_fragments")

    @dataclass
    class Merge(BaseOperation):
        """New columns added to existing fragments: every fragment of the new version (same ids)
        and its schema (a :class:`LanceSchema`, pylance's, or a pyarrow schema whose fields are
        matched to the dataset's by name).

        Attributes:
            preserves_nullability: every new column is nullable, so concurrent appends (whose
                fragments lack it) may commit (otherwise they conflict).
        """

        fragments: list[FragmentMetadata]
        schema: Any
        preserves_nullability: bool = False

        def __post_init__(self) -> None:
            if isinstance(self.schema, pa.Schema):  # (pylance's warning; it still works)
                warnings.warn(
                    "Passing a pyarrow.Schema to Merge is deprecated. Please use a LanceSchema instead.",
                    DeprecationWarning,
                    stacklevel=3,
                )
            self.fragments = _fragments(self.fragments, "fragments")

    @dataclass
    class Project(BaseOperation):
        """A new schema over the same data: drop, rename or reorder columns. Fields are matched
        by id (a :class:`LanceSchema`, or pylance's)."""

        schema: Any
        preserves_nullability: bool = False

    @dataclass
    class UpdateMap:
        """Changes to a string map: ``None`` values delete keys; ``replace`` empties it first."""

        updates: dict[str, str | None]
        replace: bool = False

    @dataclass
    class UpdateConfig(BaseOperation):
        """Changes to the config, table metadata, schema metadata and fields' metadata (by id)."""

        config_updates: LanceOperation.UpdateMap | None = None
        table_metadata_updates: LanceOperation.UpdateMap | None = None
        schema_metadata_updates: LanceOperation.UpdateMap | None = None
        field_metadata_updates: dict[int, LanceOperation.UpdateMap] | None = None

    @dataclass
    class DataReplacementGroup:
        """A new data file for fragment ``fragment_id``, replacing the file with the same fields."""

        fragment_id: int
        new_file: DataFile

    @dataclass
    class DataReplacement(BaseOperation):
        """Replace data files of fragments (or add files for columns that were all null)."""

        replacements: list[LanceOperation.DataReplacementGroup]


class _Unsupported(LanceOperation.BaseOperation):
    """A pylance operation lance_table does not commit; takes any arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        given = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"LanceOperation.{type(self).__name__}({', '.join(given)})"


# pylance 14's other operation names (and their helper records): they construct, and committing
# an operation among them raises UnsupportedOperationError.
UNSUPPORTED = (
    "Clone",
    "CreateIndex",
    "DataOverlay",
    "DataOverlayFile",
    "DataOverlayGroup",
    "RewrittenIndex",
)
for _name in UNSUPPORTED:
    _cls = type(_name, (_Unsupported,), {"__qualname__": f"LanceOperation.{_name}", "__module__": __name__})
    setattr(LanceOperation, _name, _cls)


@dataclass
class Transaction:
    """An operation with the version it was planned against (pylance's ``Transaction``), as
    ``write_fragments(..., return_transaction=True)`` returns it.

    Example:
        ```python
        txn = ds.read_transaction(ds.version)
        print(txn.read_version, type(txn.operation).__name__)
        ```
    """

    read_version: int
    operation: LanceOperation.BaseOperation
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    transaction_properties: dict[str, str] | None = field(default_factory=dict)
