"""pylance's ``LanceOperation`` namespace and ``Transaction``: what a driver commits with
``Dataset.commit`` after workers wrote fragments (:func:`lance_table.fragment.write_fragments`).

The operations lance_table commits (``Overwrite``, ``Append``, ``Delete``, ``Rewrite``,
``Restore``) have pylance 14's fields and defaults; the other names pylance has exist so that code
naming them imports, and committing one raises :class:`UnsupportedOperationError` naming it.
Fragment lists take this library's :class:`FragmentMetadata` or any object with pylance's
``to_json()`` (pylance's own metadata), converted on construction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_table.table.fragment_metadata import FragmentMetadata


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
    """The operations :meth:`lance_table.Dataset.commit` applies (pylance's ``LanceOperation``)."""

    class BaseOperation:
        """Base of every operation."""

    @dataclass
    class Overwrite(BaseOperation):
        """Create a dataset, or replace every fragment and the schema of one.

        Attributes:
            new_schema: the Arrow schema of the new version (field ids are given in schema order,
                as ``write_fragments(mode="overwrite")`` gives them).
            fragments: the fragments of the new version (new ids are assigned on commit).
            initial_bases: not supported (must be None).
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

    @dataclass
    class Restore(BaseOperation):
        """Make an old version the latest again."""

        version: int


class _Unsupported(LanceOperation.BaseOperation):
    """A pylance operation lance_table does not commit; takes any arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"LanceOperation.{type(self).__name__}(...)"


# pylance 14's other operation names (and their helper records): they construct, and committing
# an operation among them raises UnsupportedOperationError.
UNSUPPORTED = (
    "Update",
    "Merge",
    "Clone",
    "CreateIndex",
    "DataReplacement",
    "DataReplacementGroup",
    "DataOverlay",
    "DataOverlayFile",
    "DataOverlayGroup",
    "Project",
    "UpdateMap",
    "UpdateConfig",
    "RewrittenIndex",
)
for _name in UNSUPPORTED:
    _cls = type(_name, (_Unsupported,), {"__qualname__": f"LanceOperation.{_name}", "__module__": __name__})
    setattr(LanceOperation, _name, _cls)


@dataclass
class Transaction:
    """An operation with the version it was planned against (pylance's ``Transaction``), as
    ``write_fragments(..., return_transaction=True)`` returns it."""

    read_version: int
    operation: LanceOperation.BaseOperation
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    transaction_properties: dict[str, str] | None = field(default_factory=dict)
