"""Whether the strings a read returns are valid UTF-8.

Decoders build string arrays from a file's bytes without looking at them: a damaged page would
give an array that fails ``validate(full=True)`` and raises ``UnicodeDecodeError`` only when a
value is converted, far from the read. pylance refuses such a read (it validates the strings it
decodes); so does a read here, with a :class:`~lance_table.errors.CorruptFileError` naming the file
and the column.

The check looks at the bytes of the values returned (a take checks the rows it takes, as
pylance's does). Most strings are ASCII: one pass over the value bytes (their largest byte below
0x80) shows it at memory speed; only other strings pay Arrow's full UTF-8 validation.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError

_STRINGS = {pa.string(): np.int32, pa.large_string(): np.int64}


def check(table: pa.Table, path: str) -> pa.Table:
    """``table``, once every string of it is found valid UTF-8.

    Raises:
        CorruptFileError: a column holds strings that are not valid UTF-8 (naming ``path`` and it).
    """
    for name, col in zip(table.column_names, table.columns):
        if _holds_strings(col.type):
            problem = problem_of(col)
            if problem is not None:
                what = f"column {name!r} holds strings that are not valid UTF-8 ({problem}, of the rows read)"
                raise CorruptFileError(path, what)
    return table


def problem_of(data: pa.Array | pa.ChunkedArray) -> str | None:
    """What is wrong with the strings of ``data`` (any type: strings in lists, structs and
    dictionaries are looked at too), or None when they are all valid UTF-8."""
    if isinstance(data, pa.ChunkedArray):
        for chunk in data.chunks:
            found = problem_of(chunk)
            if found is not None:
                return found
        return None
    t = data.type
    if not _holds_strings(t) or not len(data):
        return None
    offset_type = _STRINGS.get(t)
    if offset_type is not None:
        return _strings_problem(data, offset_type)
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


def _strings_problem(arr: pa.Array, offset_type: type[np.integer]) -> str | None:
    """The problem of a string array's values: none when their bytes are all ASCII (one pass),
    else what Arrow's full validation says."""
    _, offsets, data = arr.buffers()
    width = np.dtype(offset_type).itemsize
    if offsets is None or offsets.size < (arr.offset + len(arr) + 1) * width:
        return _validated(arr)
    start = int(np.frombuffer(offsets, offset_type, 1, arr.offset * width)[0])
    end = int(np.frombuffer(offsets, offset_type, 1, (arr.offset + len(arr)) * width)[0])
    if end <= start:
        return None if end == start else _validated(arr)
    if data is None or start < 0 or end > data.size:
        return _validated(arr)
    if int(np.frombuffer(data, np.uint8, end - start, start).max()) < 0x80:
        return None
    return _validated(arr)


def _validated(arr: pa.Array) -> str | None:
    try:
        arr.validate(full=True)
    except (pa.ArrowInvalid, ValueError) as exc:
        return str(exc)
    return None


@lru_cache(maxsize=256)
def _holds_strings(t: pa.DataType) -> bool:
    """Whether values of type ``t`` hold UTF-8 strings anywhere (kept per type)."""
    if t in _STRINGS or pa.types.is_string_view(t):
        return True
    if pa.types.is_dictionary(t):
        return _holds_strings(t.value_type)
    if isinstance(t, pa.ExtensionType):
        return _holds_strings(t.storage_type)
    return any(_holds_strings(t.field(i).type) for i in range(t.num_fields))


__all__ = ["check", "problem_of"]
