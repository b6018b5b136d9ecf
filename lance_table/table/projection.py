"""What a scan outputs: a :class:`ScanSpec`'s columns resolved against the dataset schema.

A projection names top-level columns, nested fields (``"s.x"``, output as a column named
``s.x``), the system columns ``_rowid``, ``_rowaddr`` and ``_rowoffset``, or SQL expressions
(pylance's ``columns={"name": "expression"}``). The scan reads the top-level columns and system
columns these need (:attr:`Projection.read`, :attr:`Projection.system`); :meth:`Projection.apply`
turns what it read into the output, batch by batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import SchemaError
from lance_table.table.row_ids import ROW_ADDR, ROW_ID, SYSTEM_COLUMNS
from lance_table.table.scan_spec import ScanSpec


@dataclass(frozen=True)
class Projection:
    """The output of a scan and what it reads.

    Attributes:
        read: the top-level dataset columns read, in schema order.
        system: the system columns read, in the order pylance appends them.
        schema: the output schema.
        exprs: per output column its expression over ``read + system``; None when every output
            column is one of those as is (a selection, no evaluation).
    """

    read: tuple[str, ...]
    system: tuple[str, ...]
    schema: pa.Schema
    exprs: tuple[pc.Expression, ...] | None

    def apply(self, table: pa.Table) -> pa.Table:
        """The output columns of ``table`` (which holds ``read`` then ``system``)."""
        if not self.schema.names:
            return table.select([])
        if self.exprs is None:
            columns = [table.column(name) for name in self.schema.names]
        else:
            from lance_table.filters.projection import project

            columns = project(table, list(self.exprs), [f"c{i}" for i in range(len(self.exprs))]).columns
        columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(columns, self.schema)]
        return pa.Table.from_arrays(columns, schema=self.schema)


def resolve(schema: pa.Schema, spec: ScanSpec) -> Projection:
    """The projection of ``spec`` over a dataset of ``schema``.

    Raises:
        SchemaError: a column or nested field does not exist; an output column is named twice.
        FilterError: an expression does not parse or cannot be evaluated.
    """
    names = schema.names
    fields: list[pa.Field] = []
    exprs: list[pc.Expression] = []
    read: set[str] = set()
    system: set[str] = set()
    simple = True
    if spec.expressions is not None:
        from lance_table.filters.projection import compile_value

        with_system = pa.schema(
            [*schema, *(pa.field(n, pa.uint64()) for n in SYSTEM_COLUMNS if n not in names)]
        )
        for name, sql in spec.expressions:
            expr, type_, used = compile_value(sql, with_system)
            read.update(c for c in used if c in names)
            system.update(c for c in used if c not in names)
            fields.append(pa.field(name, type_))
            exprs.append(expr)
        simple = False
    else:
        for name in names if spec.columns is None else spec.columns:
            if name in names:
                read.add(name)
                fields.append(schema.field(name))
                exprs.append(pc.field(name))
            elif name in SYSTEM_COLUMNS:
                system.add(name)
                fields.append(pa.field(name, pa.uint64()))
                exprs.append(pc.field(name))
            else:
                path, found = _nested(schema, name)
                read.add(path[0])
                fields.append(found.with_name(name))
                exprs.append(pc.field(*path))
                simple = False
    for wanted, name in ((spec.with_row_id, ROW_ID), (spec.with_row_address, ROW_ADDR)):
        if wanted and name not in (f.name for f in fields):
            system.add(name)
            fields.append(pa.field(name, pa.uint64()))
            exprs.append(pc.field(name))
    seen: set[str] = set()
    for f in fields:
        if f.name in seen:
            raise SchemaError(f"column {f.name!r} is projected more than once")
        seen.add(f.name)
    out = pa.schema(fields, metadata=schema.metadata)
    return Projection(
        tuple(n for n in names if n in read),
        tuple(n for n in SYSTEM_COLUMNS if n in system),
        out,
        None if simple else tuple(exprs),
    )


def _nested(schema: pa.Schema, name: str) -> tuple[list[str], pa.Field]:
    """The path of a nested field ``"s.x.y"`` and the field.

    Raises:
        SchemaError: there is no such field.
    """
    parts = name.split(".")
    if len(parts) < 2 or parts[0] not in schema.names:
        raise SchemaError(f"column {name!r} is not in the dataset; columns are {schema.names}")
    found = schema.field(parts[0])
    for depth, part in enumerate(parts[1:], start=1):
        if not pa.types.is_struct(found.type) or found.type.get_field_index(part) < 0:
            parent = ".".join(parts[:depth])
            raise SchemaError(f"column {name!r} is not in the dataset: {parent!r} has no field {part!r}")
        found = found.type.field(part)
    return parts, found
