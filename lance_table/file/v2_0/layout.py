"""How a 2.0 file maps schema fields to physical columns.

Columns are allocated in pre-order: a struct gets a header column followed by its children's
columns (unless it is a *packed* struct, stored as one column), a list gets an offsets column
followed by its item's columns, and every other field is one leaf column (strings of early 2.0
files take two: see :func:`column_assignment`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.file.container import URL_ARRAY_ENCODING, unpack_encoding
from lance_table.file.fields import PACKED_KEY, PACKED_LEGACY_KEY, meta
from lance_table.schema import FieldNode, is_binary_like
from lance_table.storage.sources import ByteSource

# page encodings by their bytes: the pages of a column of many files mostly store the same bytes
# (messages parsed here are never changed)
_PARSED: LRU[bytes, Any] = LRU(4096)


def is_packed_struct(node: FieldNode) -> bool:
    """Whether a struct field is stored row-major in one column (pylance's 2.0 rule)."""
    if not pa.types.is_struct(node.arrow_type):
        return False
    legacy = meta(node, PACKED_LEGACY_KEY)
    if legacy is not None:
        return legacy == "true"
    return meta(node, PACKED_KEY) is not None


def column_assignment(
    roots: list[FieldNode], two_columns: Callable[[FieldNode, int], bool] | None = None
) -> dict[int, int]:
    """Map each field id that owns a physical column to its column index.

    ``two_columns(node, index)`` says whether a string/binary field whose column would be ``index``
    is stored as a ``list<u8>``, in two columns (offsets, then the bytes), as 2.0 files written by
    pylance up to 0.14 store strings.
    """
    out: dict[int, int] = {}
    next_index = 0
    # pre-order, in a loop (a recursive closure would be a reference cycle holding
    # ``two_columns``, and through it the reader that asks)
    todo = list(reversed(roots))
    while todo:
        node = todo.pop()
        out[node.id] = next_index
        next_index += 1
        if two_columns is not None and is_binary_like(node.arrow_type) and two_columns(node, out[node.id]):
            next_index += 1
        if not is_packed_struct(node):
            todo.extend(reversed(node.children))
    return out


def page_encoding(enc: Any, source: ByteSource) -> Any:
    """A page's 2.0 encoding (a ``file2.Encoding``) stored in the file's metadata, parsed once
    for all files that store the same bytes; None when it is stored elsewhere or does not parse
    as an ``ArrayEncoding`` (the caller then reads it as it reads any page, which says why).
    """
    if enc.WhichOneof("location") != "direct":
        return None
    raw = enc.direct.encoding
    found = _PARSED.get(raw)
    if found is None:
        try:
            url, found = unpack_encoding(enc, source, "a page")
        except Exception:
            return None
        if url != URL_ARRAY_ENCODING or found is None:
            return None
        _PARSED.put(raw, found)
    return found
