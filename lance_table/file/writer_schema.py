"""What a file writer checks and finds of its schema once: whether its Lance fields describe the
Arrow schema, whether a batch's schema is of the same types, and the leaf plans of a 2.1/2.2 file's
top-level fields, remembered per schema (a stream of small appends makes one writer per file)."""

from __future__ import annotations

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.errors import SchemaError
from lance_table.file.container import FileVersion
from lance_table.file.v2_1.blob_v2 import blob_v2_below, is_blob_v2
from lance_table.file.v2_1.encode import LeafPlan, leaf_plan
from lance_table.schema import FieldNode


def leaf_plans(
    roots: list[FieldNode], schema: pa.Schema, version: FileVersion
) -> tuple[LeafPlan, ...] | None:
    """The :func:`leaf_plan` of each top-level field of a 2.1/2.2 file whose fields are checked to
    describe ``schema`` (:func:`check_matches`) and hold no blob v2 column: what
    :meth:`LanceFileWriter._field_writer` finds for each, found once per schema and tree (both
    immutable, remembered by identity and kept) instead of at every file of a stream of small
    appends. None for other files (2.0, blob v2 columns): the writer looks at each field itself.

    Raises:
        SchemaError, UnsupportedFormatError, PackedStructError: as the writer's own checks.
    """
    if version is FileVersion.V2_0:
        return None
    key = (id(schema), tuple(map(id, roots)), version)
    hit = PLANS.get(key)
    if hit is not None and hit[0] is schema and all(a is b for a, b in zip(hit[1], roots)):
        return hit[2]
    check_matches(roots, schema)
    if any(is_blob_v2(r.field) or blob_v2_below(r) for r in roots):
        return None
    large = version is FileVersion.V2_2
    plans = tuple(leaf_plan(root, large) for root in roots)
    PLANS.put(key, (schema, tuple(roots), plans))  # (both kept: their ids stay their own)
    return plans


#: the leaf plans of recent writers' schemas (see :func:`leaf_plans`)
PLANS: LRU[
    tuple[int, tuple[int, ...], FileVersion], tuple[pa.Schema, tuple[FieldNode, ...], tuple[LeafPlan, ...]]
] = LRU(32)


def same_types(a: pa.Schema, b: pa.Schema) -> bool:
    """Whether the two schemas have the same field names and types (nullability and metadata
    aside). Equal schemas (a batch of the writer's own schema: every write) are found so in C at
    once; walking the fields in Python costs some 25 us for a schema of eight fields."""
    if a.equals(b):
        return True
    return len(a) == len(b) and all(x.name == y.name and x.type == y.type for x, y in zip(a, b))


def check_matches(roots: list[FieldNode], schema: pa.Schema) -> None:
    """Raises SchemaError unless the top-level fields ``roots`` have the names and types of
    ``schema``'s fields, in order."""
    if len(roots) != len(schema) or any(
        r.name != f.name or r.arrow_type != f.type for r, f in zip(roots, schema)
    ):
        raise SchemaError("the Lance fields do not describe the Arrow schema")
