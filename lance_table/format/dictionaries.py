"""Dictionary values of legacy (0.1) datasets, which only ever grow: every data file's keys index
a prefix of the values the manifest holds.

The manifest file holds them (pylance reads a dictionary column's keys against the values of the
*dataset manifest*). Each dictionary field's values are written one field after another, as in a
legacy data file: strings and binaries as their bytes followed by ``n + 1`` little-endian int64
absolute positions (``Field.dictionary.offset`` points at the positions), numbers PLAIN (the offset
points at the values). ``Field.dictionary.length`` is the number of values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import CorruptFileError, SchemaError, UnsupportedFormatError
from lance_table.format.fragment import LEGACY_DATA_FORMAT
from lance_table.format.manifest import Manifest
from lance_table.schema import LanceField, build_tree, fields_from_pb, is_binary_like


def is_prefix(short: pa.Array, long: pa.Array) -> bool:
    """Whether ``long`` starts with the values of ``short``."""
    return len(short) <= len(long) and long.slice(0, len(short)).equals(short)


def extended(current: Mapping[int, pa.Array], written: Mapping[int, pa.Array]) -> dict[int, pa.Array] | None:
    """Per field id the longer of the two values, when the other is a prefix of it; None when a
    field's values disagree (keys written against one mean other values in the other)."""
    out = dict(current)
    for fid, values in written.items():
        have = out.get(fid)
        if have is None or is_prefix(have, values):
            out[fid] = values
        elif not is_prefix(values, have):
            return None
    return out


def _is_plain(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _dictionary_value_types(fields: tuple[LanceField, ...] | list[LanceField]) -> dict[int, pa.DataType]:
    """The value type of every dictionary field, by id."""
    return {
        node.id: node.arrow_type.value_type
        for root in build_tree(fields)
        for node in root.walk()
        if pa.types.is_dictionary(node.arrow_type)
    }


def _encode_dictionaries(manifest: Manifest, out: bytearray) -> dict[int, tuple[int, int]]:
    """Append the dictionary values of ``manifest``'s dictionary fields to ``out`` (at the start of
    the manifest file); return each field's ``(offset, length)``. A dictionary field without values
    gets an empty dictionary."""
    placed: dict[int, tuple[int, int]] = {}
    if manifest.data_storage_version != LEGACY_DATA_FORMAT:
        return placed  # 2.x files keep their dictionaries in their pages
    if not any(f.logical_type.startswith("dict:") for f in manifest.fields):
        return placed
    for fid, t in sorted(_dictionary_value_types(list(manifest.fields)).items()):
        values = manifest.dictionaries.get(fid)
        if values is None:
            values = pa.array([], t)
        if values.type != t:
            raise SchemaError(f"dictionary of field {fid} holds {values.type}, not {t}")
        if is_binary_like(t):
            width = np.int64 if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else np.int32
            offs = np.frombuffer(values.buffers()[1], width, len(values) + 1, values.offset).astype(np.int64)
            data = values.buffers()[2]
            start = len(out)
            if data is not None and offs[-1] > offs[0]:
                out += data.to_pybytes()[offs[0] : offs[-1]]
            positions = offs - offs[0] + start
            placed[fid] = (len(out), len(values))
            out += positions.astype("<i8").tobytes()
        elif _is_plain(t):
            placed[fid] = (len(out), len(values))
            buf = values.buffers()[1]
            width = t.bit_width // 8
            if buf is not None and len(values):
                out += buf.to_pybytes()[values.offset * width : (values.offset + len(values)) * width]
        else:
            raise SchemaError(f"dictionary of field {fid}: values of type {t} are not written")
    return placed


def _decode_dictionaries(data: bytes, limit: int, pb_fields: Any, path: str) -> dict[int, pa.Array]:
    """The dictionary values the manifest's fields locate, all of them inside ``data[:limit]``.

    Raises:
        CorruptFileError: a dictionary's offset or length, or its value positions, lie outside the
            values section, or strings are not UTF-8.
    """
    located = {
        pf.id: (int(pf.dictionary.offset), int(pf.dictionary.length))
        for pf in pb_fields
        if pf.HasField("dictionary")
    }
    if not located:
        return {}
    types = _dictionary_value_types(fields_from_pb(pb_fields))
    out: dict[int, pa.Array] = {}
    for fid, (offset, length) in located.items():
        t = types.get(fid)
        if t is None:
            continue  # not a dictionary field: the location means nothing
        if offset < 0 or length < 0:
            raise CorruptFileError(path, f"dictionary of field {fid} at ({offset}, {length}) is negative")
        if is_binary_like(t):
            if offset + (length + 1) * 8 > limit:
                raise CorruptFileError(
                    path,
                    f"dictionary of field {fid}: {length} value positions at {offset} run past "
                    "the values section",
                )
            pos = np.frombuffer(data, "<i8", length + 1, offset).astype(np.int64)
            if pos[0] < 0 or pos[-1] > limit or np.any(np.diff(pos) < 0):
                raise CorruptFileError(
                    path,
                    f"dictionary of field {fid}: value positions are not increasing inside the file",
                    offset=offset,
                )
            lengths = np.diff(pos)
            offsets = np.zeros(length + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
            if not large and offsets[-1] > (1 << 31) - 1:
                raise UnsupportedFormatError(f"dictionary of field {fid} is too large for {t}", path=path)
            valid = lengths != 0  # as in legacy data files, an empty value reads as null
            nulls = int(length - np.count_nonzero(valid))
            validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes()) if nulls else None
            arr = pa.Array.from_buffers(
                t,
                length,
                [
                    validity,
                    pa.py_buffer(offsets.astype(np.int64 if large else np.int32).tobytes()),
                    pa.py_buffer(bytes(data[int(pos[0]) : int(pos[-1])])),
                ],
                nulls,
            )
            if pa.types.is_string(t) or pa.types.is_large_string(t):
                try:
                    arr.validate(full=True)
                except pa.ArrowInvalid as exc:
                    raise CorruptFileError(
                        path, f"dictionary of field {fid} is not valid UTF-8: {exc}"
                    ) from exc
            out[fid] = arr
        elif _is_plain(t):
            width = t.bit_width // 8
            if offset + length * width > limit:
                raise CorruptFileError(
                    path,
                    f"dictionary of field {fid}: {length} values at {offset} run past the values section",
                )
            raw = bytes(data[offset : offset + length * width])
            out[fid] = pa.Array.from_buffers(t, length, [None, pa.py_buffer(raw)])
        else:
            raise UnsupportedFormatError(
                f"dictionary values of type {t} (field {fid}) are not supported", path=path
            )
    return out
