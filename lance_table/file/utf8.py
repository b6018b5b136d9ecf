"""Whether the strings a read returns are valid UTF-8.

Decoders build string arrays from a file's bytes without looking at them: a damaged page would
give an array that fails ``validate(full=True)`` and raises ``UnicodeDecodeError`` only when a
value is converted, far from the read. pylance refuses such a read (it validates the strings it
decodes); so does a read here, with a :class:`~lance_table.errors.CorruptFileError` naming the file
and the column.

The check looks at the bytes of the values returned (a take checks the rows it takes, as
pylance's does). Most strings are ASCII: one pass over the value bytes (their largest byte below
0x80) shows it at memory speed; only other strings pay Arrow's full UTF-8 validation.

Where it runs: a 2.1/2.2 page of a field without nesting is checked by the job that decodes it
(on the decoding threads; a dictionary page whose dictionary is sound needs no look at its rows,
which are the dictionary's), other fields once a file's read is assembled, a batch of small
files per column (a batch that fails is read file by file, which names the file), and legacy
pages as they are decoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from struct import unpack_from

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError

# the offsets of each string type (by type id: a type's hash costs more), as struct formats
_STRINGS = {pa.string().id: "<i", pa.large_string().id: "<q"}
_VIEW = pa.string_view().id
_EXTENSION = pa.bool8().id  # (every extension type's id)
# value bytes up to which a copy's ``isascii`` beats numpy's pass (whose fixed cost is larger)
_SMALL = 1 << 14


def check(table: pa.Table, path: str, types: Sequence[pa.DataType | None] | None = None) -> pa.Table:
    """``table``, once every string of it is found valid UTF-8 (``types``: its columns' types,
    when the caller has them at hand: they cost less than the table's; None for a column that
    needs no check, its decoder checked it).

    Raises:
        CorruptFileError: a column holds strings that are not valid UTF-8 (naming ``path`` and it).
    """
    for i, t in enumerate(table.schema.types if types is None else types):
        if t is not None and holds_strings(t):
            col = table.column(i)
            for k in range(col.num_chunks):
                problem = problem_of(col.chunk(k), t)
                if problem is not None:
                    name = table.schema.names[i]
                    what = f"column {name!r} holds strings that are not valid UTF-8"
                    raise CorruptFileError(path, f"{what} ({problem}, of the rows read)")
    return table


def problem_of(data: pa.Array | pa.ChunkedArray, t: pa.DataType | None = None) -> str | None:
    """What is wrong with the strings of ``data`` (any type, ``t`` when known: strings in lists,
    structs and dictionaries are looked at too), or None when they are all valid UTF-8."""
    if isinstance(data, pa.ChunkedArray):
        for chunk in data.chunks:
            found = problem_of(chunk, t)
            if found is not None:
                return found
        return None
    t = data.type if t is None else t
    if not holds_strings(t) or not len(data):
        return None
    offset_format = _STRINGS.get(t.id)
    if offset_format is not None:
        return _strings_problem(data, offset_format)
    if pa.types.is_dictionary(t):
        return problem_of(data.dictionary)
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            found = problem_of(data.field(i))
            if found is not None:
                return found
        return None
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        offsets = data.offsets
        lo, hi = offsets[0].as_py(), offsets[-1].as_py()
        return problem_of(data.values.slice(lo, hi - lo))
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        return problem_of(data.values.slice(data.offset * size, len(data) * size))
    return _validated(data)  # (string views, extension types: Arrow's own check)


def _strings_problem(arr: pa.Array, offset_format: str) -> str | None:
    """The problem of a string array's values: none when their bytes are all ASCII (one pass),
    else what Arrow's full validation says."""
    _, offsets, data = arr.buffers()
    width = 4 if offset_format == "<i" else 8
    first, n = arr.offset * width, len(arr)
    if offsets is None or data is None or offsets.size < first + (n + 1) * width:
        return _validated(arr)
    (end,) = unpack_from(offset_format, offsets, first + n * width)
    if end > data.size:
        return _validated(arr)
    if data.size <= _SMALL:  # the whole buffer (the values' bytes among them): no more offsets read
        return None if data.to_pybytes().isascii() else _validated(arr)
    (start,) = unpack_from(offset_format, offsets, first)
    if not 0 <= start <= end:
        return _validated(arr)
    if int(np.frombuffer(data, np.uint8, end - start, start).max(initial=0)) < 0x80:
        return None
    return _validated(arr)


def _validated(arr: pa.Array) -> str | None:
    try:
        arr.validate(full=True)
    except (pa.ArrowInvalid, ValueError) as exc:
        return str(exc)
    return None


def holds_strings(t: pa.DataType) -> bool:
    """Whether values of type ``t`` hold UTF-8 strings anywhere."""
    tid = t.id
    if t.num_fields or pa.types.is_dictionary(t) or tid == _EXTENSION:
        return _nested_holds_strings(t)
    return tid in _STRINGS or tid == _VIEW


@lru_cache(maxsize=256)
def _nested_holds_strings(t: pa.DataType) -> bool:
    """:func:`holds_strings` of a type of children, a dictionary or an extension (kept per type)."""
    if pa.types.is_dictionary(t):
        return holds_strings(t.value_type)
    if isinstance(t, pa.ExtensionType):
        return holds_strings(t.storage_type)
    return any(holds_strings(t.field(i).type) for i in range(t.num_fields))


__all__ = ["check", "holds_strings", "problem_of"]
