"""Arrow type names as DataFusion's ``arrow_cast(expr, 'Type')`` spells them, parsed to pyarrow types.

The names are Arrow's own: ``Int32``, ``UInt8``, ``Float32``, ``Utf8``, ``LargeUtf8``, ``Utf8View``,
``Binary``, ``Boolean``, ``Date32``, ``Decimal128(10, 2)``, ``FixedSizeBinary(16)``,
``Timestamp(Nanosecond, None)`` (also ``Timestamp(ns)``, ``Timestamp(Second, Some("UTC"))``,
``Timestamp(µs, "UTC")``), ``Time64(Nanosecond)``, ``Duration(Second)``, ``List(Int64)`` (also
``List(nullable Int64)``), ``LargeList(...)``, ``FixedSizeList(4, Float32)`` (also ``4 x Float32``)
and ``Dictionary(Int32, Utf8)``. Lower-case SQL names such as ``int32`` are refused, as DataFusion
refuses them.
"""

from __future__ import annotations

import re

import pyarrow as pa

from lance_table.errors import FilterError

_PLAIN: dict[str, pa.DataType] = {
    "Null": pa.null(),
    "Boolean": pa.bool_(),
    "Int8": pa.int8(),
    "Int16": pa.int16(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
    "UInt8": pa.uint8(),
    "UInt16": pa.uint16(),
    "UInt32": pa.uint32(),
    "UInt64": pa.uint64(),
    "Float16": pa.float16(),
    "Float32": pa.float32(),
    "Float64": pa.float64(),
    "Utf8": pa.string(),
    "LargeUtf8": pa.large_string(),
    "Utf8View": pa.string_view(),
    "Binary": pa.binary(),
    "LargeBinary": pa.large_binary(),
    "BinaryView": pa.binary_view(),
    "Date32": pa.date32(),
    "Date64": pa.date64(),
}
_UNITS = {
    "Second": "s",
    "s": "s",
    "Millisecond": "ms",
    "ms": "ms",
    "Microsecond": "us",
    "µs": "us",
    "us": "us",
    "Nanosecond": "ns",
    "ns": "ns",
}
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"[^"]*")|(?P<word>[A-Za-zµ_][A-Za-z0-9µ_]*)|(?P<num>-?\d+)|(?P<sym>[(),]))'
)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error()
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0

    def error(self) -> FilterError:
        return FilterError(
            f"arrow_cast(): unsupported type '{self.text}'; it must be an Arrow type name such as "
            "'Int32', 'Utf8', 'Timestamp(Nanosecond, None)' or 'FixedSizeList(4, Float32)'"
        )

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("", "")

    def take(self, kind: str, value: str | None = None) -> str:
        k, v = self.peek()
        if k != kind or (value is not None and v != value):
            raise self.error()
        self.i += 1
        return v

    def accept(self, value: str) -> bool:
        if self.peek()[1] == value:
            self.i += 1
            return True
        return False

    def number(self) -> int:
        return int(self.take("num"))

    def unit(self) -> str:
        unit = _UNITS.get(self.take("word"))
        if unit is None:
            raise self.error()
        return unit

    def timezone(self) -> str | None:
        kind, value = self.peek()
        if kind == "str":
            self.i += 1
            return value[1:-1]
        word = self.take("word")
        if word == "None":
            return None
        if word != "Some":
            raise self.error()
        self.take("sym", "(")
        tz = self.take("str")[1:-1]
        self.take("sym", ")")
        return tz

    def item(self) -> pa.DataType:
        self.accept("nullable")  # newer Arrow spells a nullable list item "List(nullable Int64)"
        return self.type()

    def type(self) -> pa.DataType:
        name = self.take("word")
        if name in _PLAIN:
            return _PLAIN[name]
        self.take("sym", "(")
        result = self.arguments(name)
        self.take("sym", ")")
        return result

    def arguments(self, name: str) -> pa.DataType:
        if name == "Timestamp":
            unit = self.unit()
            tz = self.timezone() if self.accept(",") else None
            return pa.timestamp(unit, tz)
        if name in ("Time32", "Time64", "Duration"):
            unit = self.unit()
            factory = {"Time32": pa.time32, "Time64": pa.time64, "Duration": pa.duration}[name]
            try:
                return factory(unit)
            except ValueError:
                raise self.error() from None
        if name in ("Decimal128", "Decimal256"):
            precision = self.number()
            self.take("sym", ",")
            scale = self.number()
            return (pa.decimal128 if name == "Decimal128" else pa.decimal256)(precision, scale)
        if name == "FixedSizeBinary":
            return pa.binary(self.number())
        if name in ("List", "LargeList"):
            item = self.item()
            return pa.list_(item) if name == "List" else pa.large_list(item)
        if name == "FixedSizeList":
            size = self.number()
            if not self.accept(","):
                self.take("word", "x")
            return pa.list_(self.item(), size)
        if name == "Dictionary":
            key = self.type()
            self.take("sym", ",")
            return pa.dictionary(key, self.type())
        raise self.error()


def parse_arrow_type(text: str) -> pa.DataType:
    """The pyarrow type that ``text`` names in Arrow's (and DataFusion's ``arrow_cast``) spelling.

    Raises:
        FilterError: ``text`` is not an Arrow type name this parser knows.

    Example:
        ```python
        from lance_table.filters.arrow_types import parse_arrow_type

        assert parse_arrow_type("FixedSizeList(4, Float32)") == pa.list_(pa.float32(), 4)
        ```
    """
    parser = _Parser(text)
    result = parser.type()
    if parser.i != len(parser.tokens):
        raise parser.error()
    return result
