"""Literals and casts: SQL literal text to Arrow scalars, and conversions as DataFusion makes them."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_table.errors import FilterError


@dataclass(frozen=True)
class _Operand:
    """A compiled sub-expression with its Arrow type; ``value`` is set when it is a constant literal."""

    expr: pc.Expression
    type: pa.DataType
    value: pa.Scalar | None = None

    @property
    def is_literal(self) -> bool:
        return self.value is not None

    @property
    def is_null_literal(self) -> bool:
        return self.value is not None and not self.value.is_valid


def _literal(value: pa.Scalar) -> _Operand:
    return _Operand(pc.scalar(value), value.type, value)


_NULL_BOOL = _literal(pa.scalar(None, pa.bool_()))

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_DATE_RE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*")
_TIMESTAMP_RE = re.compile(
    r"""\s*(\d{4})-(\d{1,2})-(\d{1,2})
        (?:[Tt\s]\s*(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?
        \s*([Zz]|[+-]\d{2}(?::?\d{2})?|[A-Za-z][A-Za-z0-9_+\-/]+)?\s*""",
    re.VERBOSE,
)
_EPOCH = dt.datetime(1970, 1, 1)

_DT = exp.DataType.Type
_CAST_TYPES: dict[Any, pa.DataType] = {
    _DT.TINYINT: pa.int8(),
    _DT.SMALLINT: pa.int16(),
    _DT.INT: pa.int32(),
    _DT.BIGINT: pa.int64(),
    _DT.UTINYINT: pa.uint8(),
    _DT.USMALLINT: pa.uint16(),
    _DT.UINT: pa.uint32(),
    _DT.UBIGINT: pa.uint64(),
    _DT.FLOAT: pa.float32(),
    _DT.DOUBLE: pa.float64(),
    _DT.TEXT: pa.string(),
    _DT.VARCHAR: pa.string(),
    _DT.CHAR: pa.string(),
    _DT.NVARCHAR: pa.string(),
    _DT.NCHAR: pa.string(),
    _DT.BINARY: pa.binary(),
    _DT.VARBINARY: pa.binary(),
    _DT.DATE: pa.date32(),
    _DT.BOOLEAN: pa.bool_(),
}
_TIMESTAMP_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}


def _integer_literal(value: int) -> _Operand:
    if _INT64_MIN <= value <= _INT64_MAX:
        return _literal(pa.scalar(value, pa.int64()))
    if 0 <= value < 2**64:
        return _literal(pa.scalar(value, pa.uint64()))
    raise FilterError(f"integer literal {value} is out of range")


def _number_literal(text: str) -> _Operand:
    if text.isdigit():
        return _integer_literal(int(text))
    try:
        return _literal(pa.scalar(float(text), pa.float64()))
    except ValueError as e:
        raise FilterError(f"invalid number {text!r}") from e


def _parse_date(text: str) -> dt.date:
    m = _DATE_RE.fullmatch(text)
    try:
        if m is None:
            raise ValueError
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        raise FilterError(f"cannot read {text!r} as a date (expected YYYY-MM-DD)") from None


def _parse_timestamp(text: str) -> pa.Scalar:
    """``text`` as a naive timestamp[ns] (timestamp[us] outside ns range); an offset converts to UTC."""
    m = _TIMESTAMP_RE.fullmatch(text)
    try:
        if m is None:
            raise ValueError
        year, month, day = int(m[1]), int(m[2]), int(m[3])
        hour, minute, second = int(m[4] or 0), int(m[5] or 0), int(m[6] or 0)
        wall = dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        raise FilterError(
            f"cannot read {text!r} as a timestamp (expected YYYY-MM-DD[ HH:MM[:SS[.fff]]][Z|+HH:MM|zone])"
        ) from None
    nanos = (wall - _EPOCH) // dt.timedelta(microseconds=1) * 1000 + int((m[7] or "").ljust(9, "0"))
    zone = m[8]
    if zone and len(zone) > 1 and zone[0].isalpha():  # a zone name: UTC, Europe/Berlin, ...
        try:
            offset = zoneinfo.ZoneInfo(zone).utcoffset(wall)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise FilterError(f"cannot read {text!r} as a timestamp: unknown time zone {zone!r}") from None
        assert offset is not None
        nanos -= offset // dt.timedelta(microseconds=1) * 1000
    elif zone and zone not in "Zz":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset_minutes = int(digits[:2]) * 60 + int(digits[2:] or 0)
        nanos -= sign * offset_minutes * 60 * 1_000_000_000
    if _INT64_MIN <= nanos <= _INT64_MAX:
        return pa.scalar(nanos, pa.timestamp("ns"))
    return pa.scalar(nanos // 1000, pa.timestamp("us"))


def _is_temporal(t: pa.DataType) -> bool:
    return bool(pa.types.is_date(t) or pa.types.is_timestamp(t))


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _cast_options(source: pa.DataType, target: pa.DataType) -> pc.CastOptions:
    """DataFusion's CAST: floats truncate to integers, times truncate to coarser units and to dates;
    everything else (overflow, unparsable strings) is an error."""
    from_float = pa.types.is_floating(source)
    return pc.CastOptions(
        target,
        # (and, as DataFusion, integers too wide for a float's mantissa are rounded)
        allow_float_truncate=(from_float and (pa.types.is_integer(target) or pa.types.is_decimal(target)))
        or (pa.types.is_integer(source) and pa.types.is_floating(target)),
        allow_time_truncate=_is_temporal(source) and _is_temporal(target),
        allow_decimal_truncate=pa.types.is_decimal(source) and not pa.types.is_decimal(target),
    )


def _cast(x: Any, source: pa.DataType, target: pa.DataType) -> Any:
    """``x`` (an Array, Scalar or Expression of type ``source``) cast to ``target`` as DataFusion casts."""
    if pa.types.is_integer(source) and pa.types.is_date32(target) and source != pa.int32():
        x = x.cast(pa.int32())  # Arrow casts only int32 to date32 (a count of days)
        source = pa.int32()
    if pa.types.is_integer(source) and pa.types.is_decimal(target) and target.precision < 38:
        # Arrow wants room for every value of the integer type; DataFusion checks the values
        x = x.cast(pa.decimal128(38, target.scale))
        source = pa.decimal128(38, target.scale)
    if pa.types.is_floating(source) and pa.types.is_integer(target):
        # DataFusion truncates the fraction, and refuses NaN, infinities and values out of range
        return pc.trunc(x).cast(options=pc.CastOptions(target))
    if _is_string(target) and (pa.types.is_floating(source) or _is_naive(source)):
        text = x.cast(options=_cast_options(source, pa.string()))
        text = _float_text(text) if pa.types.is_floating(source) else _timestamp_text(text)
        return text if target == pa.string() else text.cast(target)
    if _is_naive(source) and pa.types.is_timestamp(target) and target.tz and target.tz not in _UTC_NAMES:
        # a naive timestamp meeting a zoned one is wall-clock time in that zone, as DataFusion reads it
        naive = pa.timestamp(target.unit)
        x = x.cast(options=_cast_options(source, naive))
        return pc.assume_timezone(x, timezone=target.tz, ambiguous="earliest", nonexistent="earliest")
    return x.cast(options=_cast_options(source, target))


def _rewrite(x: Any, rules: list[tuple[str, str]]) -> Any:
    for pattern, replacement in rules:
        x = pc.replace_substring_regex(x, pattern=pattern, replacement=replacement)
    return x


# Arrow writes floats as 1.5e+20, 3, nan and switches to exponents at 1e15 and below 1e-6;
# DataFusion (as pylance casts) writes 1.5e20, 3.0, NaN and switches at 1e16 and below 1e-5
_FLOAT_TEXT = [
    (r"^nan$", "NaN"),
    (r"^(-?\d+)$", r"\1.0"),
    (r"^(-?)0\.00000([1-9])$", r"\1\2e-6"),
    (r"^(-?)0\.00000([1-9])(\d+)$", r"\1\2.\3e-6"),
    (r"^(-?\d)e\+15$", r"\1" + "0" * 15 + ".0"),
    *((rf"^(-?\d)\.(\d{{{k}}})e\+15$", r"\1\2" + "0" * (15 - k) + ".0") for k in range(1, 16)),
    (r"^(-?\d)\.(\d{15})(\d+)e\+15$", r"\1\2.\3"),
    (r"e\+", "e"),
]
# Arrow writes naive timestamps as 2024-01-01 00:00:00.500000; DataFusion as 2024-01-01T00:00:00.500
_TIMESTAMP_TEXT = [
    (r"^(\d+-\d\d-\d\d) ", r"\1T"),
    (r"\.(000|000000|000000000)$", ""),
    (r"(\.\d{3})000000$", r"\1"),
    (r"(\.\d{3})000$", r"\1"),
    (r"(\.\d{6})000$", r"\1"),
]


def _float_text(x: Any) -> Any:
    return _rewrite(x, _FLOAT_TEXT)


def _timestamp_text(x: Any) -> Any:
    return _rewrite(x, _TIMESTAMP_TEXT)


_UTC_NAMES = frozenset({"UTC", "utc", "Etc/UTC", "+00:00", "Z", "GMT"})


def _is_naive(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) and not t.tz)


def _cast_scalar(value: pa.Scalar, target: pa.DataType) -> pa.Scalar:
    if value.type == target:
        return value
    if not value.is_valid:
        return pa.scalar(None, target)
    if _is_string(value.type) and (pa.types.is_date(target) or pa.types.is_timestamp(target)):
        text = value.as_py()
        if pa.types.is_date(target):
            return pa.scalar(_parse_date(text), pa.date32()).cast(target)
        return _cast(_parse_timestamp(text), pa.timestamp("ns"), target)
    try:
        return _cast(value, value.type, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise FilterError(f"cannot convert {value.as_py()!r} to {target}: {e}") from e


def _coerce_literal(literal: _Operand, target: pa.DataType) -> _Operand:
    """``literal`` converted to ``target``, the type of the operand it meets, as DataFusion does.

    Only conversions that keep the comparison's meaning are made; anything else is left to Arrow's
    implicit casts (an int64 column against 1.5 compares in float64, say).
    """
    value = literal.value
    assert value is not None
    source = value.type
    if source == target:
        return literal
    if not value.is_valid:
        return _literal(pa.scalar(None, target))
    convert = False
    if _is_string(source):
        # A string meets a date, timestamp, number or boolean: read the string as that type.
        convert = (
            _is_temporal(target)
            or pa.types.is_integer(target)
            or pa.types.is_floating(target)
            or pa.types.is_boolean(target)
            or _is_string(target)
        )
    elif pa.types.is_date(source) and _is_temporal(target):
        convert = True
    elif pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        convert = True  # naive literals are UTC; the unit is the column's (DataFusion truncates)
    elif pa.types.is_floating(target) and (pa.types.is_integer(source) or pa.types.is_floating(source)):
        convert = True  # f32 = 0.1 compares in float32
    elif pa.types.is_decimal(target) and (pa.types.is_integer(source) or pa.types.is_floating(source)):
        exact = _exact_numeric(literal, target)
        return exact if exact is not None else literal
    elif pa.types.is_integer(source) and pa.types.is_integer(target):
        try:
            return _literal(value.cast(target))  # only when it fits; otherwise compare in int64
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return literal
    if not convert:
        return literal
    return _literal(_cast_scalar(value, target))


def _exact_numeric(literal: _Operand, target: pa.DataType) -> _Operand | None:
    """A numeric ``literal`` as ``target`` (an integer, float or decimal type) when the value is kept
    exactly; None otherwise (a fraction into an integer type, a number out of the type's range)."""
    value = literal.value
    if value is None or not value.is_valid:
        return None
    source = value.type
    numeric = pa.types.is_integer(source) or pa.types.is_floating(source)
    if not numeric or source == target:
        return None
    if pa.types.is_floating(target):
        return _literal(value.cast(target, safe=False))
    if not (pa.types.is_integer(target) or pa.types.is_decimal(target)) or pa.types.is_floating(source):
        return None
    try:
        if pa.types.is_decimal(target):  # Arrow's cast would want room for any int64
            converted = pa.scalar(decimal.Decimal(value.as_py()), target)
        else:
            converted = value.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, decimal.InvalidOperation):
        return None
    return _literal(converted) if converted.as_py() == value.as_py() else None


# the decimal type DataFusion widens an integer type to when it meets a decimal
_DECIMAL_WIDTH = {8: 3, 16: 5, 32: 10, 64: 20}


def _integer_as_decimal(t: pa.DataType) -> pa.DataType:
    return pa.decimal128(_DECIMAL_WIDTH[t.bit_width], 0)


def _like_pattern(pattern: str, escape: str | None) -> str:
    """``pattern`` with ``escape`` as its escape character, rewritten for Arrow (which uses ``\\``)."""
    if escape is None or escape == "\\":
        return pattern
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise FilterError(f"LIKE pattern {pattern!r} ends with its escape character {escape!r}")
            out.append("\\" + escaped)
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def _arrow_type(data_type: exp.DataType) -> pa.DataType:
    kind = data_type.this
    params = [p.this for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
    numbers: list[int] = []
    for p in params:
        if not (isinstance(p, exp.Literal) and not p.is_string and p.this.isdigit()):
            raise FilterError(f"unsupported CAST target type {data_type.sql()}")
        numbers.append(int(p.this))
    if kind in (_DT.TIMESTAMP, _DT.DATETIME):
        precision = numbers[0] if numbers else 6
        if precision not in _TIMESTAMP_UNITS:
            raise FilterError(f"unsupported timestamp precision {precision} (use 0, 3, 6 or 9)")
        return pa.timestamp(_TIMESTAMP_UNITS[precision])
    if kind == _DT.DECIMAL:
        if len(numbers) != 2:
            raise FilterError("DECIMAL needs a precision and a scale: DECIMAL(p, s)")
        precision, scale = numbers
        try:
            return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        except ValueError as e:
            raise FilterError(f"invalid type {data_type.sql()}: {e}") from e
    if kind in _CAST_TYPES:
        return _CAST_TYPES[kind]
    raise FilterError(f"unsupported CAST target type {data_type.sql()}")
