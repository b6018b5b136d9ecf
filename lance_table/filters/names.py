"""Column names in SQL text resolved against a schema, as pylance resolves them.

* A backquoted name (```MixedCase```) and a double-quoted name (``"MixedCase"``) match exactly.
* An unquoted top-level name matches the column of exactly that name; when there is none, the first
  column (in schema order) whose name equals it ignoring case: ``mixedcase``, ``MIXEDCASE`` and
  ``MixedCase`` all read the column ``MixedCase``; with columns ``Foo`` and ``foo``, ``foo`` reads
  ``foo`` and ``FOO`` reads ``Foo``.
* Struct fields after the first part (``s.x``, ```s`.`x```, ``s['x']``) match exactly, quoted or not.

An unknown name is an :class:`~lance_table.errors.ColumnNotFoundError` that lists the columns and
suggests the nearest one.
"""

from __future__ import annotations

import pyarrow as pa

from lance_table.errors import ColumnNotFoundError, FilterError


def resolve_column(name: str, schema: pa.Schema, *, quoted: bool) -> str:
    """The name of the top-level column of ``schema`` that ``name`` refers to.

    Raises:
        ColumnNotFoundError: no column matches.
        FilterError: the matching name appears more than once in the schema.
    """
    names = schema.names
    found: str | None = None
    if name in names:
        found = name
    elif not quoted:
        folded = name.casefold()
        found = next((n for n in names if n.casefold() == folded), None)
    if found is None:
        raise ColumnNotFoundError(name, names)
    if names.count(found) > 1:
        raise FilterError(f"ambiguous column '{found}': the schema has it more than once")
    return found


def resolve_field(struct_type: pa.StructType, name: str, parent: str) -> int:
    """The index of the field ``name`` (matched exactly) of the struct column ``parent``.

    Raises:
        ColumnNotFoundError: the struct has no such field.
    """
    index = struct_type.get_field_index(name)
    if index < 0:
        fields = [struct_type.field(i).name for i in range(struct_type.num_fields)]
        raise ColumnNotFoundError(name, fields, parent=parent)
    return index
