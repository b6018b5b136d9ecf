"""The SQL functions pylance users write, compiled to Arrow compute expressions.

Strings: ``starts_with``, ``ends_with``, ``contains``, ``regexp_like`` (flags ``i``, ``m``, ``s``,
``U``), ``regexp_match`` (a condition in a filter: whether the text matches), ``lower``, ``upper``, ``length``
(``char_length``), ``octet_length``, ``concat`` (NULLs skipped) and ``||`` (NULL when a side is);
``coalesce`` (``ifnull``, ``nvl``), ``nullif``; lists: ``array_has`` (``array_contains``,
``list_has``), ``array_has_any``, ``array_has_all``, ``array_length`` (``cardinality``) with array
literals ``[1, 2]`` or ``make_array(1, 2)``; ``CURRENT_DATE``, ``now()`` and ``CURRENT_TIMESTAMP``
(UTC, as DataFusion); JSON: ``json_extract``, ``json_exists``, ``json_get`` and ``json_get_<type>``,
``json_array_contains``, ``json_array_length`` (see :mod:`lance_table.filters.json_functions`);
``arrow_cast(x, 'Type')`` with an Arrow type name (see :mod:`lance_table.filters.arrow_types`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_table.errors import FilterError
from lance_table.filters import arrays, forms, json_functions
from lance_table.filters.arrow_types import parse_arrow_type
from lance_table.filters.forms import _Compiler
from lance_table.filters.literals import _coerce_literal, _is_string, _literal, _Operand

_SIMPLE: dict[type[exp.Expr], tuple[str, Callable[..., pc.Expression]]] = {
    exp.Lower: ("lower", pc.utf8_lower),
    exp.Upper: ("upper", pc.utf8_upper),
    exp.Abs: ("abs", pc.abs_checked),  # abs(-128) of an int8 is an overflow error, as in pylance
    exp.Length: ("length", pc.utf8_length),
}
_TEXT_TESTS: dict[type[exp.Expr], tuple[str, Callable[..., pc.Expression]]] = {
    exp.StartsWith: ("starts_with", pc.starts_with),
    exp.EndsWith: ("ends_with", pc.ends_with),
    exp.Contains: ("contains", pc.match_substring),
}
_ANONYMOUS = {
    "regexp_match",
    "regexp_like",
    "list_has",
    "array_has_any",
    "list_has_any",
    "arrays_overlap",
    "list_has_all",
    "cardinality",
    "list_length",
    "octet_length",
    "now",
    "starts_with",
    "ends_with",
    "contains",
    "arrow_cast",
}
_REGEX_FLAGS = frozenset("imsU")


def is_function(node: exp.Expr) -> bool:
    """Whether :func:`compile_function` compiles ``node``."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower() in _ANONYMOUS or str(node.this).lower() in json_functions.NAMES
    return isinstance(node, (*_HANDLED, exp.JSONExtract, exp.JSONArrayContains))


def compile_function(c: _Compiler, node: exp.Expr) -> _Operand:
    """The function call ``node`` compiled with ``c``.

    Raises:
        FilterError: wrong arguments, a non-literal pattern, or types the function does not take.
    """
    if isinstance(node, (exp.JSONExtract, exp.JSONArrayContains)) or (
        isinstance(node, exp.Anonymous) and str(node.this).lower() in json_functions.NAMES
    ):
        return json_functions.compile_json(c, node)
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        args = list(node.expressions)
        if name in ("starts_with", "ends_with", "contains"):
            cls = {"starts_with": exp.StartsWith, "ends_with": exp.EndsWith, "contains": exp.Contains}[name]
            _arity(name, args, 2)
            return _text_test(c, cls, args[0], args[1])
        if name in ("regexp_match", "regexp_like"):
            if not 2 <= len(args) <= 3:
                raise FilterError(f"{name}() takes 2 or 3 arguments, got {len(args)}")
            if name == "regexp_match" and not c.regexp_match_as_boolean:
                raise FilterError(
                    "regexp_match() returns a list, which is not supported here; use regexp_like()"
                )
            result = _regexp_like(c, name, args[0], args[1], args[2] if len(args) == 3 else None)
            if name == "regexp_match":  # as a condition, pylance reads it as "its list IS NOT NULL"
                result = c.apply(name, lambda m: pc.coalesce(m, False), result)
            return result
        if name == "list_has":
            _arity(name, args, 2)
            return _array_has(c, "has", args[0], args[1])
        if name in ("array_has_any", "list_has_any", "arrays_overlap"):
            _arity(name, args, 2)
            return _array_has(c, "has_any", args[0], args[1])
        if name == "list_has_all":
            _arity(name, args, 2)
            return _array_has(c, "has_all", args[0], args[1])
        if name in ("cardinality", "list_length"):
            _arity(name, args, 1)
            return _array_length(c, args[0])
        if name == "arrow_cast":
            return _arrow_cast(c, args)
        if name == "octet_length":
            _arity(name, args, 1)
            return c.apply("octet_length()", _octet_length, c.compile(args[0]))
        _arity(name, args, 0)  # now()
        return _now()
    if type(node) in _SIMPLE:
        name, fn = _SIMPLE[type(node)]
        if any(v for k, v in node.args.items() if k != "this"):
            raise FilterError(f"{name}() takes exactly one argument")
        operand = c.compile(node.this)
        if pa.types.is_null(operand.type):  # lower(NULL) is a NULL string, abs(NULL) a NULL number
            operand = _literal(pa.scalar(None, pa.int64() if name == "abs" else pa.string()))
        return c.apply(f"{name}()", fn, operand)
    if type(node) in _TEXT_TESTS:
        return _text_test(c, type(node), node.this, node.expression)
    if isinstance(node, exp.RegexpLike):
        return _regexp_like(c, "regexp_like", node.this, node.expression, node.args.get("flag"))
    if isinstance(node, exp.ArrayContains):
        return _array_has(c, "has", node.this, node.expression)
    if isinstance(node, exp.ArrayContainsAll):
        return _array_has(c, "has_all", node.this, node.expression)
    if isinstance(node, exp.ArrayOverlaps):
        return _array_has(c, "has_any", node.this, node.expression)
    if isinstance(node, exp.ArraySize):
        if node.args.get("expression") is not None:
            raise FilterError("array_length() with a dimension is not supported")
        return _array_length(c, node.this)
    if isinstance(node, exp.Array):
        return _list_value(c, node)
    if isinstance(node, exp.Coalesce):
        return coalesce(c, [c.compile(a) for a in [node.this, *node.expressions]])
    if isinstance(node, exp.Nullif):
        return _nullif(c, c.compile(node.this), c.compile(node.expression))
    if isinstance(node, exp.CurrentDate):
        return _literal(pa.scalar(dt.datetime.now(dt.timezone.utc).date(), pa.date32()))
    if isinstance(node, exp.CurrentTimestamp):  # ``CURRENT_TIMESTAMP`` / ``current_timestamp()``
        if node.this is not None:
            raise FilterError("current_timestamp() takes no arguments")
        return _now()
    if isinstance(node, exp.DPipe):
        return concat(c, [c.compile(node.this), c.compile(node.expression)], skip_nulls=False)
    if isinstance(node, exp.ConcatWs):
        return concat_ws(c, [c.compile(a) for a in node.expressions])
    if isinstance(node, exp.Concat):
        return concat(c, [c.compile(a) for a in node.expressions], skip_nulls=True)
    raise c.unsupported(node)


_HANDLED = (
    *_SIMPLE,
    *_TEXT_TESTS,
    exp.RegexpLike,
    exp.ArrayContains,
    exp.ArrayContainsAll,
    exp.ArrayOverlaps,
    exp.ArraySize,
    exp.Array,
    exp.Coalesce,
    exp.Nullif,
    exp.CurrentDate,
    exp.CurrentTimestamp,
    exp.DPipe,
    exp.Concat,
    exp.ConcatWs,
)


def _now() -> _Operand:
    """``now()``: the time of the call in UTC, as DataFusion gives it (``CURRENT_TIMESTAMP`` too)."""
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    return _literal(pa.scalar(now, pa.timestamp("ns")))


def regexp_match_nulls(c: _Compiler, node: exp.Expr) -> _Operand | None:
    """For ``regexp_match(...) IS [NOT] NULL``: TRUE where its list would hold the match, NULL where
    it would be NULL (no match, or a NULL text); None when ``node`` is not a call of regexp_match."""
    if not (isinstance(node, exp.Anonymous) and str(node.this).lower() == "regexp_match"):
        return None
    args = list(node.expressions)
    if not 2 <= len(args) <= 3:
        raise FilterError(f"regexp_match() takes 2 or 3 arguments, got {len(args)}")
    found = _regexp_like(c, "regexp_match", args[0], args[1], args[2] if len(args) == 3 else None)
    return c.apply("regexp_match", lambda m: pc.if_else(m, True, None), found)


def _arity(name: str, args: Sequence[exp.Expr], n: int) -> None:
    if len(args) != n:
        raise FilterError(f"{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")


def _text_pattern(c: _Compiler, name: str, node: exp.Expr) -> str | None:
    """A function's literal text argument (None for a NULL literal)."""
    pattern = c.compile(node)
    if pattern.is_null_literal:
        return None
    if pattern.value is None or not _is_string(pattern.type):
        raise FilterError(f"the pattern of {name}() must be a string literal")
    text: str = pattern.value.as_py()
    return text


def _string(c: _Compiler, name: str, node: exp.Expr) -> _Operand:
    value = c.compile(node)
    if value.is_null_literal:
        return _literal(pa.scalar(None, pa.string()))
    if not _is_string(value.type):
        raise FilterError(f"{name}() needs a string argument, got {value.type}")
    return value


def _text_test(c: _Compiler, cls: type[exp.Expr], value_node: exp.Expr, pattern_node: exp.Expr) -> _Operand:
    name, fn = _TEXT_TESTS[cls]
    value = _string(c, name, value_node)
    pattern = _text_pattern(c, name, pattern_node)
    if pattern is None or value.is_null_literal:
        return _literal(pa.scalar(None, pa.bool_()))
    return c.apply(f"{name}()", lambda x: fn(x, pattern=pattern), value)


def _regexp_like(
    c: _Compiler, name: str, value_node: exp.Expr, pattern_node: exp.Expr, flags_node: exp.Expr | None
) -> _Operand:
    value = _string(c, name, value_node)
    pattern = _text_pattern(c, name, pattern_node)
    flags = "" if flags_node is None else _text_pattern(c, name, flags_node)
    if pattern is None or flags is None or value.is_null_literal:
        return _literal(pa.scalar(None, pa.bool_()))
    unknown = set(flags) - _REGEX_FLAGS
    if unknown:
        raise FilterError(
            f"{name}() does not support the flag(s) {''.join(sorted(unknown))!r} (use i, m, s, U)"
        )
    ignore_case = "i" in flags
    inline = "".join(sorted(set(flags) - {"i"}))
    if inline:
        pattern = f"(?{inline}){pattern}"
    try:  # Arrow compiles the pattern when it first meets a value
        pc.match_substring_regex(pa.array([""]), pattern=pattern, ignore_case=ignore_case)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise FilterError(f"invalid regular expression {pattern!r} in {name}(): {e}") from e
    return c.apply(
        f"{name}()", lambda x: pc.match_substring_regex(x, pattern=pattern, ignore_case=ignore_case), value
    )


def _octet_length(x: pc.Expression) -> pc.Expression:
    return pc.binary_length(x)


def _list_operand(c: _Compiler, name: str, node: exp.Expr) -> _Operand:
    operand = c.compile(node)
    t = operand.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        raise FilterError(f"{name}() needs a list column, got {t}")
    if operand.is_literal:
        raise FilterError(f"{name}() needs a list column, not a literal")
    return operand


def _array_literal(c: _Compiler, name: str, node: exp.Expr, element: pa.DataType) -> pa.Scalar:
    """``[v, ...]`` or ``make_array(v, ...)`` as a list scalar of ``element``s."""
    maker = isinstance(node, exp.Anonymous) and str(node.this).lower() in ("make_array", "make_list")
    if isinstance(node, exp.Array) or maker:
        items = list(node.expressions)
    elif isinstance(node, exp.Null):
        return pa.scalar(None, pa.list_(element))
    else:
        raise FilterError(f"the second argument of {name}() must be a list literal such as [1, 2]")
    values = [_needle(c, name, item, element) for item in items]
    types = {v.type for v in values if v.is_valid}
    target = types.pop() if len(types) == 1 else element
    return pa.scalar([v.cast(target).as_py() if v.is_valid else None for v in values], pa.list_(target))


def _list_value(c: _Compiler, node: exp.Array) -> _Operand:
    """A list literal ``[1.5, 2]`` as a value (an update of a vector column, say): a list of the
    items' common type (integers and floats: floats)."""
    items = [c.compile(item) for item in node.expressions]
    if any(item.value is None for item in items):
        raise FilterError("the items of a list literal must be literals")
    try:
        values = pa.array([item.value.as_py() for item in items if item.value is not None])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise FilterError(f"the items of a list literal have no common type: {e}") from e
    return _literal(pa.scalar(values.to_pylist(), pa.list_(values.type)))


def _needle(c: _Compiler, name: str, node: exp.Expr, element: pa.DataType) -> pa.Scalar:
    operand = c.compile(node)
    if operand.value is None:
        raise FilterError(f"the values {name}() looks for must be literals")
    if not operand.is_null_literal and _is_string(operand.type) != _is_string(element):
        raise FilterError(f"{name}() cannot look for a {operand.type} value in a list of {element}")
    coerced = _coerce_literal(operand, element) if not pa.types.is_null(element) else operand
    assert coerced.value is not None
    return coerced.value


def _array_has(c: _Compiler, kind: str, list_node: exp.Expr, needle_node: exp.Expr) -> _Operand:
    name = f"array_{kind}"
    array = _list_operand(c, name, list_node)
    element = array.type.value_type
    if kind == "has":
        needle = _needle(c, name, needle_node, element)
    else:
        needle = _array_literal(c, name, needle_node, element)
    try:
        expr = arrays.call(kind, array.expr, array.type, needle)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as e:
        raise FilterError(f"cannot apply {name}() to {array.type} and {needle.type}: {e}") from e
    return _Operand(expr, pa.bool_())


def _array_length(c: _Compiler, node: exp.Expr) -> _Operand:
    array = _list_operand(c, "array_length", node)
    return c.apply("array_length()", lambda x: pc.list_value_length(x).cast(pa.uint64()), array)


def coalesce(c: _Compiler, operands: list[_Operand]) -> _Operand:
    """The first non-NULL operand, in the operands' common type (literals take a column's type)."""
    operands = forms.unify(c, operands, "coalesce()")
    if all(o.is_null_literal for o in operands):
        return operands[0]
    if len(operands) == 1:
        return operands[0]
    return c.apply("coalesce()", pc.coalesce, *operands)


def _nullif(c: _Compiler, a: _Operand, b: _Operand) -> _Operand:
    equal = c.compare("=", a, b)
    return c.apply(
        "nullif()",
        lambda x, e: pc.if_else(pc.coalesce(e, pa.scalar(False)), pa.scalar(None, a.type), x),
        a,
        equal,
    )


def concat(c: _Compiler, operands: list[_Operand], *, skip_nulls: bool) -> _Operand:
    """``a || b`` (NULL when one side is) or ``concat(a, ...)`` (NULL arguments skipped)."""
    texts = [o for o in operands if not o.is_null_literal]
    if not skip_nulls and len(texts) < len(operands):
        return _literal(pa.scalar(None, pa.string()))
    for o in texts:
        if not _is_string(o.type):
            raise FilterError(
                f"cannot apply {'concat()' if skip_nulls else '||'} to {o.type}: it needs strings"
            )
    if not texts:
        return _literal(pa.scalar("", pa.string()))
    target = pa.large_string() if any(pa.types.is_large_string(o.type) for o in texts) else pa.string()
    texts = [c.convert(o, target) for o in texts]
    sep = pa.scalar("", target)
    if skip_nulls:
        return c.apply(
            "concat()",
            lambda *xs: pc.binary_join_element_wise(*xs, sep, null_handling="replace", null_replacement=""),
            *texts,
        )
    return c.apply("||", lambda *xs: pc.binary_join_element_wise(*xs, sep), *texts)


def concat_ws(c: _Compiler, operands: list[_Operand]) -> _Operand:
    """``concat_ws(sep, a, ...)``: the non-NULL arguments joined by ``sep`` (NULL when ``sep`` is)."""
    if len(operands) < 2:
        raise FilterError("concat_ws() takes a separator and at least one value")
    sep = operands[0]
    if sep.is_null_literal:
        return _literal(pa.scalar(None, pa.string()))
    if sep.value is None or not _is_string(sep.type):
        raise FilterError("the separator of concat_ws() must be a string literal")
    texts = [o for o in operands[1:] if not o.is_null_literal]
    for o in texts:
        if not _is_string(o.type):
            raise FilterError(f"cannot apply concat_ws() to {o.type}: it needs strings")
    if not texts:
        return _literal(pa.scalar("", pa.string()))
    target = pa.large_string() if any(pa.types.is_large_string(o.type) for o in texts) else pa.string()
    texts = [c.convert(o, target) for o in texts]
    separator = sep.value.as_py()
    sep_value, empty_value = pa.scalar(separator, target), pa.scalar("", target)

    def join(*xs: pc.Expression) -> pc.Expression:
        # every non-NULL value with the separator before it, then the first separator cut off
        as_expr = isinstance(xs[0], pc.Expression)
        sep_scalar, empty = (pc.scalar(v) if as_expr else v for v in (sep_value, empty_value))
        pieces = [
            pc.if_else(pc.is_valid(x), pc.binary_join_element_wise(sep_scalar, x, empty), empty) for x in xs
        ]
        joined = pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(*pieces, empty)
        return pc.utf8_slice_codeunits(joined, start=len(separator))

    return c.apply("concat_ws()", join, *texts)


def _arrow_cast(c: _Compiler, args: list[exp.Expr]) -> _Operand:
    _arity("arrow_cast", args, 2)
    if not (isinstance(args[1], exp.Literal) and args[1].is_string):
        raise FilterError("arrow_cast() takes its type as a string literal, such as 'Int32'")
    return c.convert(c.compile(args[0]), parse_arrow_type(args[1].this))
