"""pylance's JSON functions in filters and column expressions, over JSON columns (``arrow.json``),
JSON text in string columns, and the JSONB values ``json_get`` returns:

* ``json_extract(j, '$.a.b')``: the JSON text of the value at a JSONPath (strings keep their
  quotes: ``json_extract(j, '$.name') = '"Alice"'``), NULL where there is none;
* ``json_exists(j, path)``: whether the path leads to a value;
* ``json_get(j, key)``: the value under an object key (or array index ``'0'``), as JSONB bytes
  that the other functions take, for nested access;
* ``json_get_string / json_get_int / json_get_float / json_get_bool(j, key)``: that value
  converted (``"35"`` is 35 for ``json_get_int``, ``"true"`` true for ``json_get_bool``);
* ``json_array_contains(j, path, v)``: whether the array at a path holds ``v`` (a string element
  equal to ``v``, or an element whose JSON text is ``v``);
* ``json_array_length(j, path)``: the length of the array at a path.

A NULL JSON value gives NULL. Where pylance stops the whole query (a value that does not convert,
a path that leads to no array), these give NULL for that row. Keys and paths are literals.

Each function is an Arrow compute function registered once per input type (as
:mod:`lance_table.filters.arrays` does). JSON has no Arrow kernel: values are parsed row by row.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

import lance_table.jsonb as jsonb
from lance_table.errors import FilterError
from lance_table.filters.forms import _Compiler
from lance_table.filters.literals import _Operand

_MISSING = object()
_LOCK = threading.Lock()
_REGISTERED: dict[tuple[str, pa.DataType], str] = {}
_PATH_STEP = re.compile(r"""\.([A-Za-z_$][\w$]*)|\[(\d+)\]|\[\s*'([^']*)'\s*\]|\[\s*"([^"]*)"\s*\]""")

NAMES = frozenset(
    {
        "json_extract",
        "json_exists",
        "json_get",
        "json_get_string",
        "json_get_int",
        "json_get_float",
        "json_get_bool",
        "json_array_contains",
        "json_array_length",
    }
)


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parse_path(path: str) -> tuple[str | int, ...]:
    """The steps of a JSONPath (``$``, ``.key``, ``[0]``, ``['key']``).

    Raises:
        FilterError: the path is not of that form (wildcards and filters are not supported).
    """
    text = path.strip()
    if not text.startswith("$"):
        raise FilterError(f"Invalid JSONPath {path!r}: it must start with '$'")
    steps: list[str | int] = []
    at = 1
    while at < len(text):
        match = _PATH_STEP.match(text, at)
        if match is None:
            raise FilterError(f"Invalid JSONPath {path!r} at {text[at:]!r} (keys, [index] and ['key'] only)")
        key, index, quoted, double = match.groups()
        steps.append(
            int(index) if index is not None else next(s for s in (key, quoted, double) if s is not None)
        )
        at = match.end()
    return tuple(steps)


def _step(value: Any, step: str | int) -> Any:
    if isinstance(step, int):
        return value[step] if isinstance(value, list) and step < len(value) else _MISSING
    return value.get(step, _MISSING) if isinstance(value, dict) else _MISSING


def _follow(value: Any, steps: tuple[str | int, ...]) -> Any:
    for step in steps:
        value = _step(value, step)
        if value is _MISSING:
            break
    return value


def _key(value: Any, key: str) -> Any:
    """``json_get``'s lookup: an array index when the key is a number, else an object key."""
    return _step(value, int(key)) if key.isdigit() and isinstance(value, list) else _step(value, key)


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            return None
    return None


def _as_float(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def _as_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    if isinstance(v, (int, float)):
        return v != 0
    return None


def _as_string(v: Any) -> str | None:
    return v if isinstance(v, str) else _text(v)


def _found(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is _MISSING or v is None else convert(v)


# name -> (output type, number of literal arguments, fn(parsed value, *literal args))
_FUNCTIONS: dict[str, tuple[pa.DataType, int, Callable[..., Any]]] = {
    "json_extract": (pa.string(), 1, lambda v, p: _found(_text)(_follow(v, p))),
    "json_exists": (pa.bool_(), 1, lambda v, p: _follow(v, p) is not _MISSING),
    "json_get": (pa.large_binary(), 1, lambda v, k: _found(lambda x: jsonb.encode(_text(x)))(_key(v, k))),
    "json_get_string": (pa.string(), 1, lambda v, k: _found(_as_string)(_key(v, k))),
    "json_get_int": (pa.int64(), 1, lambda v, k: _found(_as_int)(_key(v, k))),
    "json_get_float": (pa.float64(), 1, lambda v, k: _found(_as_float)(_key(v, k))),
    "json_get_bool": (pa.bool_(), 1, lambda v, k: _found(_as_bool)(_key(v, k))),
    "json_array_contains": (pa.bool_(), 2, lambda v, p, x: _contains(_follow(v, p), x)),
    "json_array_length": (pa.int64(), 1, lambda v, p: _length(_follow(v, p))),
}


def _contains(array: Any, value: str) -> bool:
    if not isinstance(array, list):
        return False
    return any(_text(e) == value or e == value for e in array)


def _length(array: Any) -> int | None:
    return len(array) if isinstance(array, list) else None


def _values(arr: pa.Array) -> list[Any]:
    """The parsed JSON of each row (None for NULL) of JSON text or JSONB bytes."""
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    binary = pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)
    out: list[Any] = []
    for raw in arr.to_pylist():
        if raw is None:
            out.append(_MISSING)
            continue
        try:
            out.append(json.loads(jsonb.decode(raw) if binary else raw))
        except ValueError:
            out.append(_MISSING)  # not JSON: no value (as a missing path)
    return out


def _kernel(name: str) -> Callable[..., pa.Array]:
    out_type, _, fn = _FUNCTIONS[name]

    def kernel(ctx: Any, data: Any, *literals: Any) -> pa.Array:
        if isinstance(data, pa.Scalar):
            data = pa.array([data.as_py()] * ctx.batch_length, type=data.type)
        args = [lit.as_py() for lit in literals]
        if name in ("json_extract", "json_exists", "json_array_contains", "json_array_length"):
            args[0] = parse_path(args[0])
        values = _values(data)
        return pa.array([None if v is _MISSING else fn(v, *args) for v in values], type=out_type)

    return kernel


def _function(name: str, input_type: pa.DataType) -> str:
    key = (name, input_type)
    with _LOCK:
        registered = _REGISTERED.get(key)
        if registered is None:
            out_type, literals, _ = _FUNCTIONS[name]
            registered = f"lance_table_{name}_{len(_REGISTERED)}"
            in_types = {"json": input_type, **{f"arg{i}": pa.string() for i in range(literals)}}
            pc.register_scalar_function(
                _kernel(name), registered, {"summary": name, "description": __doc__ or ""}, in_types, out_type
            )
            _REGISTERED[key] = registered
    return registered


def _json_operand(c: _Compiler, name: str, node: exp.Expr) -> _Operand:
    value = c.compile(node)
    t = value.type
    storage = t.storage_type if isinstance(t, pa.BaseExtensionType) else t
    if not (
        pa.types.is_string(storage) or pa.types.is_large_string(storage) or pa.types.is_large_binary(storage)
    ):
        raise FilterError(f"{name}() needs a JSON column, JSON text or a json_get() value, got {t}")
    return value


def _literal_text(c: _Compiler, name: str, node: exp.Expr) -> str:
    value = c.compile(node)
    if value.value is None or not value.value.is_valid or not pa.types.is_string(value.type):
        raise FilterError(f"the key or path of {name}() must be a string literal")
    text: str = value.value.as_py()
    return text


def _path_of(node: exp.JSONPath) -> str:
    """A JSONPath sqlglot parsed (in ``json_extract``) back as text."""
    out = "$"
    for part in node.expressions:
        if isinstance(part, exp.JSONPathRoot):
            continue
        if isinstance(part, exp.JSONPathKey) and isinstance(part.this, str):
            out += f"['{part.this}']"
        elif isinstance(part, exp.JSONPathSubscript) and isinstance(part.this, int):
            out += f"[{part.this}]"
        else:
            raise FilterError(f"unsupported JSONPath step in json_extract(): {part.sql()}")
    return out


def compile_json(c: _Compiler, node: exp.Expr) -> _Operand:
    """A call of one of the JSON functions, compiled with ``c``.

    Raises:
        FilterError: wrong arguments, a key or path that is not a string literal, a bad JSONPath,
            or a first argument that is not JSON.
    """
    if isinstance(node, exp.JSONExtract):
        name, data, literals = "json_extract", node.this, [_path_of(node.expression)]
    elif isinstance(node, exp.JSONArrayContains):
        name, data = "json_array_contains", node.this
        literals = [_literal_text(c, name, node.expression), _literal_text(c, name, node.args["json_type"])]
    else:
        name = str(node.this).lower()
        args = list(node.expressions)
        want = _FUNCTIONS[name][1] + 1
        if len(args) != want:
            raise FilterError(f"{name}() takes {want} arguments, got {len(args)}")
        data, literals = args[0], [_literal_text(c, name, a) for a in args[1:]]
    if name in ("json_extract", "json_exists", "json_array_contains", "json_array_length"):
        parse_path(literals[0])  # a bad path is an error now, not at scan time
    operand = _json_operand(c, name, data)
    call = pc.Expression._call(_function(name, operand.type), [operand.expr, *map(pc.scalar, literals)])
    return _Operand(call, _FUNCTIONS[name][0])
