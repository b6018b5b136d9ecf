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
from lance_table.table.row_ids import ROW_ADDR, ROW_ID, ROW_OFFSET, SYSTEM_COLUMNS
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

    def passes(self, read: pa.Schema) -> bool:
        """Whether what the scan reads (of schema ``read``) is the output as it is."""
        return self.exprs is None and read.equals(self.schema)

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


def resolve(schema: pa.Schema, spec: ScanSpec, *, nested: str = "flat") -> Projection:
    """The projection of ``spec`` over a dataset of ``schema``.

    A nested field ``"s.x"`` is a column named ``s.x`` in a scan (``nested="flat"``); in a take
    (``nested="pruned"``, as pylance's ``take`` and ``_take_rows`` return them) it is the struct
    column ``s`` with only the fields asked for, at the place of the first one asked.

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
    pruned: dict[str, list[list[str]]] = {}
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
            if name in pruned:  # asked for whole after some of its fields: whole, in their place
                pruned[name].append([])
                continue
            if name in names:
                read.add(name)
                fields.append(schema.field(name))
                exprs.append(pc.field(name))
            elif name in SYSTEM_COLUMNS:
                system.add(name)
                # pylance's takes mark _rowoffset non-nullable (its scans do not)
                fields.append(pa.field(name, pa.uint64(), nullable=name != ROW_OFFSET or nested == "flat"))
                exprs.append(pc.field(name))
            elif nested == "pruned":
                path, _ = _nested(schema, name)
                if path[0] in read and path[0] not in pruned:
                    continue  # the whole column is asked for already
                read.add(path[0])
                if path[0] not in pruned:
                    pruned[path[0]] = []
                    fields.append(schema.field(path[0]))
                    exprs.append(pc.field(path[0]))
                pruned[path[0]].append(path[1:])
            else:
                path, found = _nested(schema, name)
                read.add(path[0])
                fields.append(found.with_name(name))
                exprs.append(pc.field(*path))
                simple = False
        for i, f in enumerate(fields):
            if f.name in pruned:
                fields[i] = f.with_type(_pruned(f.type, pruned[f.name]))
                simple = False
    for wanted, name in ((spec.with_row_id, ROW_ID), (spec.with_row_address, ROW_ADDR)):
        if not wanted:
            continue
        at = [i for i, f in enumerate(fields) if f.name == name]
        if at and spec.expressions is None:  # projected already: moved to the end, as in pylance
            del fields[at[0]], exprs[at[0]]
        elif at:
            continue
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


def _pruned(type_: pa.DataType, paths: list[list[str]]) -> pa.DataType:
    """A struct type with only the fields on ``paths`` (in the struct's order)."""
    if any(not p for p in paths) or not pa.types.is_struct(type_):
        return type_
    kept = []
    for child in type_:
        below = [p[1:] for p in paths if p[0] == child.name]
        if below:
            kept.append(child.with_type(_pruned(child.type, below)))
    return pa.struct(kept)
