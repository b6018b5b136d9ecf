"""Constant pages of many small 2.1/2.2 files read in one pass (a part of :mod:`small_many`).

Both libraries write a page whose rows are all null as a constant page, and pylance 2.2 writes
one whose rows all hold one value so too (a field that is the same in every record of an
append: a source, a schema version). Among many small files such pages would each be read on
their own; here the constant pages without levels of a column (of a field without nesting, or
of a leaf of structs) are read as part of a batch: the value of each file, kept in its layout or
in a small buffer, repeated on the file's rows, for all files at once.

:func:`layout` says what a file's page holds; :func:`decode` returns None where anything does
not check out (the caller then reads the files one by one, which says what is wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

from lance_table._proto import encodings_v2_1_pb2, file2_pb2
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import exclusive_cumsum, spans
from lance_table.file.v2_1.decode import constant_bytes
from lance_table.file.v2_1.values import Fixed, Var, to_arrow

#: values held in a value buffer (variable-width) above which the files are read one by one
MAX_VAR_BYTES = 2**31 - 1
_NULL, _INLINE, _BUFFER = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ConstantLayout:
    """A constant page without levels of one file: all null, one inline value, or one value in
    a buffer (its place relative to the file's span, and size)."""

    key: tuple[Any, ...]  # interned: the same object for pages that decode alike
    layers: tuple[int, ...]  # the page's rep/def layers, innermost first
    value: bytes = b""  # the inline value
    value_at: int = -1  # the value buffer
    value_size: int = 0


def layout(
    encoding: Any,
    buffers: Sequence[tuple[int, int]],
    depth: int,
    dtype: pa.DataType,
    intern: Callable[[tuple[Any, ...]], tuple[Any, ...]],
) -> tuple[ConstantLayout, list[tuple[int, int]]] | None:
    """The layout of a page (its ``PageLayout`` and buffers) when it is a constant page without
    levels of a field ``depth`` layers deep, and the byte ranges a read of it needs; else None."""
    if encoding.WhichOneof("layout") != "constant_layout":
        return None
    const = encoding.constant_layout
    if len(const.layers) != depth or pa.types.is_dictionary(dtype):
        return None
    inline = const.HasField("inline_value")
    in_buffer = not inline and len(buffers) % 2 == 1
    if any(size for _, size in buffers[1 if in_buffer else 0 :]):
        return None  # levels: read the general way
    layers = tuple(const.layers)
    if inline:
        value = bytes(const.inline_value)
        if not value:
            return None
        return ConstantLayout(
            intern(("constant", _INLINE, len(value), layers, str(dtype))), layers, value
        ), []
    if in_buffer:
        if pa.types.is_fixed_size_binary(dtype):
            return None  # (a wide fixed-width value: read the general way)
        at, size = buffers[0]
        key = intern(("constant", _BUFFER, layers, str(dtype)))
        return ConstantLayout(key, layers, value_at=at, value_size=size), [buffers[0]]
    return ConstantLayout(intern(("constant", _NULL, layers, str(dtype))), layers), []


@dataclass(frozen=True, slots=True)
class Template:
    """A column's metadata bytes (``ColumnMetadata``) with one page, a constant page of one inline
    value, and where that value lies in them: a column described by the same bytes but for the
    value (the same field of the next append) has the same layout but for the value, without
    its metadata parsed again. See :func:`template`."""

    blob: bytes
    at: int
    size: int
    found: ConstantLayout


def template(blob: bytes, found: ConstantLayout) -> Template | None:
    """The template of a column's metadata ``blob`` whose page has the layout ``found`` (an inline
    value), or None when the value's place in the bytes is not certain.

    The place is one where the value's bytes occur, and where the bytes with the value's there
    replaced by others (each byte inverted) parse to the same metadata but for the inline value,
    which is those others: the value's bytes are the content of a length-delimited field there,
    so any bytes of that length parse alike.
    """
    value = found.value
    want = _parts(blob)
    if not value or want is None or want[1] != value:
        return None
    inverted = bytes(b ^ 0xFF for b in value)
    at = blob.find(value)
    while at >= 0:
        got = _parts(blob[:at] + inverted + blob[at + len(value) :])
        if got is not None and got[0] == want[0] and got[1] == inverted:
            return Template(blob, at, len(value), found)
        at = blob.find(value, at + 1)
    return None


def like(known: Template, blob: bytes) -> ConstantLayout | None:
    """The layout of a column whose metadata ``blob`` is ``known``'s but for the inline value;
    else None."""
    a, b = known.at, known.at + known.size
    if len(blob) != len(known.blob) or blob[:a] != known.blob[:a] or blob[b:] != known.blob[b:]:
        return None
    return ConstantLayout(known.found.key, known.found.layers, blob[a:b])


def _parts(blob: bytes) -> tuple[tuple[bytes, str, bytes], bytes] | None:
    """A column's metadata with one page of a constant layout as what it says but the page's
    inline value, and that value; None for any other (or no) metadata."""
    try:
        col = file2_pb2.ColumnMetadata.FromString(blob)
        if len(col.pages) != 1 or col.pages[0].encoding.WhichOneof("location") != "direct":
            return None
        wrapper = any_pb2.Any.FromString(col.pages[0].encoding.direct.encoding)
        page = encodings_v2_1_pb2.PageLayout.FromString(wrapper.value)
    except (DecodeError, RuntimeError, ValueError):
        return None
    if page.WhichOneof("layout") != "constant_layout" or not page.constant_layout.HasField("inline_value"):
        return None
    value = bytes(page.constant_layout.inline_value)
    page.constant_layout.ClearField("inline_value")
    col.pages[0].encoding.ClearField("direct")
    rest = (
        col.SerializeToString(deterministic=True),
        wrapper.type_url,
        page.SerializeToString(deterministic=True),
    )
    return rest, value


def shifted(found: ConstantLayout, start: int) -> ConstantLayout:
    """The layout with its value buffer's place relative to a file's span from ``start``."""
    return found if found.value_at < 0 else replace(found, value_at=found.value_at - start)


def decode(
    cols: Sequence[ConstantLayout],
    rows: np.ndarray,
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    io: PageIO,
) -> pa.Array | None:
    """The rows of constant pages of one key (``rows[k]`` of the file of ``cols[k]``, whose
    bytes start at ``bases[k]`` of ``data``), one file after another (the checks of the general
    decoder's constant pages); None where anything does not check out."""
    kind = cols[0].key[1]
    total = int(rows.sum())
    if kind == _NULL:
        return pa.nulls(total, dtype)
    if kind == _INLINE:
        width = len(cols[0].value)
        each = np.frombuffer(b"".join(c.value for c in cols), np.uint8).reshape(len(cols), width)
        return to_arrow(Fixed(np.repeat(each, rows, axis=0).tobytes(), width * 8), dtype, total, io)
    # (a malformed value buffer raises what the general decoder raises: the caller reads the
    # files one by one, which names the file)
    # (files of the same value buffer, as appends of a few sources repeat theirs, read it once)
    seen: dict[bytes, bytes] = {}
    values = []
    for c, base in zip(cols, bases.tolist()):
        raw = data[base + c.value_at : base + c.value_at + c.value_size].tobytes()
        value = seen.get(raw)
        if value is None:
            value = seen[raw] = constant_bytes(raw, io)
        values.append(value)
    lengths = np.fromiter((len(v) for v in values), np.int64, len(values))
    if int((lengths * rows).sum()) > MAX_VAR_BYTES:
        return None
    joined = np.frombuffer(b"".join(values), np.uint8)
    # each file's value repeated on its rows: a gather of its bytes, once per row
    starts = np.repeat(exclusive_cumsum(lengths), rows)
    sizes = np.repeat(lengths, rows)
    body = joined[spans(starts, sizes)].tobytes() if total else b""
    offsets = np.zeros(total + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return to_arrow(Var(body, offsets), dtype, total, io)
