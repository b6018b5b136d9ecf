"""JSONB: the binary JSON Lance stores ``arrow.json`` columns as (``lance.json`` extension, logical
type ``json``), as pylance writes it.

A value is a container: a 4-byte big-endian header (kind in the top 3 bits: array ``0x80``, object
``0x40``, scalar ``0x20``; element count in the rest), one 4-byte entry per element (type in bits
28-30, payload length in the low 28 bits), then the payloads. Object keys come sorted by their
bytes, keys' entries and payloads before the values'. Numbers are a tag byte and the fewest bytes
that hold them: ``0x00`` zero, ``0x40`` signed, ``0x50`` unsigned (1, 2, 4 or 8 bytes, big
endian), ``0x60`` a double; ``0x10``/``0x20``/``0x30`` NaN and the infinities.

Text comes back as pylance gives it: compact, keys sorted, doubles in their shortest form with
``e+N``/``e-N`` outside ``1e-5 <= |x| < 1e16``. JSON values are parsed one at a time (they are text);
columns are converted whole by :func:`encode_array` and :func:`decode_array`.
"""

from __future__ import annotations

import json
import math
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lance_table.errors import CorruptFileError, SchemaError

_ARRAY, _OBJECT, _SCALAR = 0x80000000, 0x40000000, 0x20000000
_NULL, _STRING, _NUMBER, _FALSE, _TRUE, _CONTAINER = (t << 28 for t in range(6))
_ZERO, _NAN, _INF, _NEG_INF, _INT, _UINT, _FLOAT = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60
_LEN_MASK = 0x0FFFFFFF
_U64_MAX = 2**64 - 1
_I64_MIN = -(2**63)


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _Duplicate(f"duplicate object attribute {dup!r}")
    return out


def _number(v: int | float) -> bytes:
    if isinstance(v, bool):  # pragma: no cover - json never gives bools here
        raise TypeError
    if isinstance(v, int):
        if v == 0:
            return bytes([_ZERO])
        if 0 < v <= _U64_MAX:
            for width, fmt in ((1, ">B"), (2, ">H"), (4, ">I"), (8, ">Q")):
                if v < 1 << (8 * width):
                    return bytes([_UINT]) + struct.pack(fmt, v)
        if _I64_MIN <= v < 0:
            for width, fmt in ((1, ">b"), (2, ">h"), (4, ">i"), (8, ">q")):
                if v >= -(1 << (8 * width - 1)):
                    return bytes([_INT]) + struct.pack(fmt, v)
        v = float(v)  # past 64 bits: a double, as pylance parses it
    if math.isnan(v):
        return bytes([_NAN])
    if math.isinf(v):
        return bytes([_INF if v > 0 else _NEG_INF])
    return bytes([_FLOAT]) + struct.pack(">d", v)


def _entry(v: Any) -> tuple[int, bytes]:
    """(entry type, payload) of one value inside a container."""
    if v is None:
        return _NULL, b""
    if v is True:
        return _TRUE, b""
    if v is False:
        return _FALSE, b""
    if isinstance(v, str):
        return _STRING, v.encode("utf-8")
    if isinstance(v, (int, float)):
        return _NUMBER, _number(v)
    return _CONTAINER, _container(v)


def _container(v: list[Any] | dict[str, Any]) -> bytes:
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-8"))
        entries = [_entry(v[k]) for k in keys]
        kbytes = [k.encode("utf-8") for k in keys]
        head = [_OBJECT | len(keys)] + [_STRING | len(k) for k in kbytes] + [t | len(p) for t, p in entries]
        return struct.pack(f">{len(head)}I", *head) + b"".join(kbytes) + b"".join(p for _, p in entries)
    entries = [_entry(x) for x in v]
    head = [_ARRAY | len(entries)] + [t | len(p) for t, p in entries]
    return struct.pack(f">{len(head)}I", *head) + b"".join(p for _, p in entries)


def encode(text: str) -> bytes:
    """The JSONB bytes of one JSON text.

    Raises:
        ValueError: the text is not JSON, or an object repeats a key (pylance refuses both).
    """
    value = json.loads(text, object_pairs_hook=_pairs)
    if isinstance(value, (list, dict)):
        return _container(value)
    kind, payload = _entry(value)
    return struct.pack(">II", _SCALAR, kind | len(payload)) + payload


# -- decoding ------------------------------------------------------------------------------------


def _float_text(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return "null"
    sign = "-" if math.copysign(1.0, v) < 0 else ""
    if v == 0:
        return f"{sign}0.0"
    # the shortest digits that read back as v (repr's), and the power of ten of the first one
    t = Decimal(repr(abs(v))).as_tuple()
    d = "".join(map(str, t.digits)).rstrip("0")
    x = int(t.exponent) + len(t.digits) - 1
    if -5 <= x < 16:
        if x >= 0:
            return f"{sign}{d[: x + 1].ljust(x + 1, '0')}.{d[x + 1 :] or '0'}"
        return f"{sign}0.{'0' * (-x - 1)}{d}"
    body = d[0] + (f".{d[1:]}" if len(d) > 1 else "")
    return f"{sign}{body}e{'+' if x > 0 else '-'}{abs(x)}"


def _number_text(p: bytes) -> str:
    tag = p[0] if p else -1
    if tag == _ZERO:
        return "0"
    if tag in (_NAN, _INF, _NEG_INF):
        return "null"
    if tag in (_INT, _UINT) and len(p) - 1 in (1, 2, 4, 8):
        return str(int.from_bytes(p[1:], "big", signed=tag == _INT))
    if tag == _FLOAT and len(p) == 9:
        return _float_text(struct.unpack(">d", p[1:])[0])
    raise ValueError(f"unknown JSONB number encoding {p[:1].hex()}")


def _string_text(p: bytes) -> str:
    return json.dumps(p.decode("utf-8"), ensure_ascii=False)


def _scalar_text(kind: int, p: bytes) -> str:
    if kind == _NULL:
        return "null"
    if kind == _TRUE:
        return "true"
    if kind == _FALSE:
        return "false"
    if kind == _STRING:
        return _string_text(p)
    if kind == _NUMBER:
        return _number_text(p)
    if kind == _CONTAINER:
        return _container_text(p)
    raise ValueError(f"unknown JSONB entry type {kind >> 28}")


def _lengths(entries: tuple[int, ...]) -> list[int]:
    """Payload lengths of entries (an entry with the top bit set holds an end offset instead)."""
    out, end = [], 0
    for e in entries:
        if e & 0x80000000:
            off = e & _LEN_MASK
            out.append(off - end)
            end = off
        else:
            out.append(e & _LEN_MASK)
            end += e & _LEN_MASK
    return out


def _container_text(buf: bytes) -> str:
    (header,) = struct.unpack_from(">I", buf)
    kind, n = header & 0xE0000000, header & 0x1FFFFFFF
    if kind == _SCALAR:
        (entry,) = struct.unpack_from(">I", buf, 4)
        return _scalar_text(entry & 0x70000000, buf[8 : 8 + _lengths((entry,))[0]])
    count = 2 * n if kind == _OBJECT else n
    entries = struct.unpack_from(f">{count}I", buf, 4)
    pos = 4 + 4 * count
    parts = []
    for e, size in zip(entries, _lengths(entries)):
        parts.append(_scalar_text(e & 0x70000000, buf[pos : pos + size]))
        pos += size
    if kind == _OBJECT:
        return "{" + ",".join(f"{parts[i]}:{parts[n + i]}" for i in range(n)) + "}"
    if kind == _ARRAY:
        return "[" + ",".join(parts) + "]"
    raise ValueError(f"unknown JSONB container header {header:#010x}")


def decode(data: bytes) -> str:
    """The JSON text of JSONB bytes, as pylance prints it.

    Raises:
        ValueError: the bytes are not JSONB.
    """
    if not data:
        return "null"
    try:
        return _container_text(bytes(data))
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"damaged JSONB value: {exc}") from None


# -- columns -------------------------------------------------------------------------------------


def encode_array(arr: pa.Array, what: str = "column") -> pa.Array:
    """A string (or ``arrow.json``) array as JSONB ``large_binary`` values.

    Raises:
        SchemaError: a value is not JSON (also a ValueError, as pylance raises).
    """
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    values = arr.to_pylist()
    out: list[bytes | None] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(encode(v))
        except ValueError as exc:
            raise SchemaError(f"{what}: row {i} is not valid JSON: {exc}") from None
    return pa.array(out, pa.large_binary())


def decode_array(arr: pa.Array, what: str = "column") -> pa.Array:
    """JSONB values as an ``arrow.json`` array (UTF-8 text), as pylance reads them.

    Raises:
        CorruptFileError: a value is not JSONB.
    """
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    out: list[str | None] = []
    for i, v in enumerate(arr.to_pylist()):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(decode(v))
        except ValueError as exc:
            raise CorruptFileError(what, f"row {i}: {exc}") from None
    return pa.ExtensionArray.from_storage(pa.json_(), pa.array(out, pa.string()))
