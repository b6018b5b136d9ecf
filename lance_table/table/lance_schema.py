"""pylance's ``LanceSchema`` (defined in :mod:`lance_table.schema`, pylance's ``lance.schema``): an
Arrow schema with the Lance field ids, as ``Merge`` and ``Project`` take it (a Project renames,
drops or reorders columns by field id).

pylance's own ``LanceSchema`` objects are accepted wherever ours is: they are read through their
pickled form (the ``lance.file.Field`` protobufs of their fields).
"""

from __future__ import annotations

import json
from typing import Any

from lance_table._proto import file_pb2
from lance_table.schema import LanceSchema, LanceSchemaField, fields_from_pb

__all__ = ["LanceSchema", "LanceSchemaField", "as_lance_schema"]


def as_lance_schema(value: Any) -> LanceSchema | None:
    """``value`` as a :class:`LanceSchema` when it is ours or pylance's; None otherwise.

    Raises:
        SchemaError: pylance's schema holds fields lance_table cannot read.
    """
    if isinstance(value, LanceSchema):
        return value
    if type(value).__name__ == "LanceSchema" and hasattr(value, "__reduce__"):
        try:
            _, (metadata_json, *protos) = value.__reduce__()
        except (TypeError, ValueError):
            return None
        pbs = [file_pb2.Field.FromString(p) for p in protos]
        metadata = {
            k: v.encode() if isinstance(v, str) else bytes(v) for k, v in json.loads(metadata_json).items()
        }
        return LanceSchema(fields_from_pb(pbs), metadata)
    return None
