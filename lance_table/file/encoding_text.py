"""Page encodings as pylance prints them: the pretty debug form of its Rust protobuf structures.

pylance's ``LanceFileReader.metadata()`` gives each page's encoding as text in that form
(``PageLayout {``, ``layout: Some(``, ``FullZipLayout(``, four spaces of indent a level, a comma
after every item). :func:`rust_debug` renders any protobuf message so: every field in declaration
order with the members of each ``oneof`` after them (the ``oneof`` as ``Some(Variant(value))`` or
``None``), message fields and ``optional`` scalars as ``Some(...)``/``None``, enum values as
their names in UpperCamelCase, bytes as ``b"..."``. It is text to read and to search, as
pylance's is, not a format to parse.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor

_INDENT = "    "
# Messages whose fields pylance's structures declare in another order than our descriptors
# (which list them by number): the order pylance prints.
_ORDER = {
    "lance.encodings.FixedSizeList": ("dimension", "has_validity", "items"),
    "lance.encodings21.FixedSizeList": ("items_per_value", "has_validity", "values"),
}


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_") if part)


def _str(value: str) -> str:
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_BYTE_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x5C: "\\\\", 0x22: '\\"', 0x00: "\\0"}


def _bytes(value: bytes) -> str:
    out = []
    for b in value:
        esc = _BYTE_ESCAPES.get(b)
        out.append(esc if esc is not None else chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}")
    return 'b"' + "".join(out) + '"'


def _wrap(name: str, inner: str, depth: int) -> str:
    """``Name(inner)`` in the pretty form: the inner value on its own, indented line."""
    return f"{name}(\n{_INDENT * (depth + 1)}{inner},\n{_INDENT * depth})"


def _scalar(field: FieldDescriptor, value: Any, depth: int) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return rust_debug(value, depth)
    if field.type == FieldDescriptor.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return _camel(known.name) if known is not None else str(value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return _bytes(value)
    if field.type == FieldDescriptor.TYPE_STRING:
        return _str(value)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    return str(value)


def _is_synthetic(field: FieldDescriptor) -> bool:
    """A proto3 ``optional`` field: the only member of a oneof named after it (prost: an Option)."""
    oneof = field.containing_oneof
    return oneof is not None and len(oneof.fields) == 1 and oneof.name == "_" + field.name


def _field(msg: Any, field: FieldDescriptor, depth: int) -> str:
    value = getattr(msg, field.name)
    if field.is_repeated:
        if not len(value):
            return "[]"
        pad = _INDENT * (depth + 1)
        items = "".join(f"{pad}{_scalar(field, v, depth + 1)},\n" for v in value)
        return f"[\n{items}{_INDENT * depth}]"
    if field.type == FieldDescriptor.TYPE_MESSAGE or _is_synthetic(field):
        if not msg.HasField(field.name):
            return "None"
        return _wrap("Some", _scalar(field, value, depth + 1), depth)
    return _scalar(field, value, depth)


def rust_debug(msg: Any, depth: int = 0) -> str:
    """``msg`` (a protobuf message) in the pretty debug form of pylance's Rust structures.

    Example:
        ```python
        from lance_table._proto import encodings_v2_1_pb2 as pb
        from lance_table.file.encoding_text import rust_debug

        enc = pb.CompressiveEncoding()
        enc.flat.bits_per_value = 32
        assert "Flat(" in rust_debug(enc) and "bits_per_value: 32," in rust_debug(enc)
        ```
    """
    desc = msg.DESCRIPTOR
    lines = []
    pad = _INDENT * (depth + 1)
    order = _ORDER.get(desc.full_name)
    fields = [desc.fields_by_name[name] for name in order] if order else desc.fields
    for field in fields:
        if field.containing_oneof is None or _is_synthetic(field):
            lines.append(f"{pad}{field.name}: {_field(msg, field, depth + 1)},")
    for oneof in desc.oneofs:
        if len(oneof.fields) == 1 and oneof.name == "_" + oneof.fields[0].name:
            continue
        which = msg.WhichOneof(oneof.name)
        if which is None:
            text = "None"
        else:
            field = desc.fields_by_name[which]
            inner = _wrap(_camel(which), _scalar(field, getattr(msg, which), depth + 3), depth + 2)
            text = _wrap("Some", inner, depth + 1)
        lines.append(f"{pad}{oneof.name}: {text},")
    if not lines:
        return desc.name
    return f"{desc.name} {{\n" + "\n".join(lines) + f"\n{_INDENT * depth}}}"
