"""pylance's ``lance.pydantic``: Arrow schemas of pydantic (v2) models, and the ``Vector`` and
``MultiVector`` field types of embedding columns.

pydantic is an optional dependency: ``import lance_table`` works without it, importing this module
needs it. The types map as pylance maps them:

============================================  ==================================================
annotation                                    Arrow type
============================================  ==================================================
``int``, ``float``, ``str``, ``bool``         ``int64``, ``float64``, ``utf8``, ``bool``
``bytes``, ``date``, ``datetime``             ``binary``, ``date32``, ``timestamp[us]`` (the time
                                              zone of ``Field(json_schema_extra={"tz": ...})``)
``list[X]``, ``tuple[X, ...]``                ``list<X>``
a ``BaseModel``                               ``struct`` of its fields
``Vector(dim, type)``                         ``fixed_size_list<type>[dim]``
``MultiVector(dim, type)``                    ``list<fixed_size_list<type>[dim]>``
an ``Enum``                                   its values' type; ``str`` values as
                                              ``dictionary<int32, utf8>``; mixed values ``utf8``
============================================  ==================================================

A field is nullable when its annotation admits ``None`` (``Optional[X]``, ``X | None``), or when it
is a ``Vector``/``MultiVector`` made with ``nullable=True`` (the default); a default value does not
make it nullable. Other annotations raise ``TypeError``.
"""

from __future__ import annotations

import datetime as dt
import enum
import inspect
import re
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pydantic
from pydantic_core import CoreSchema, core_schema

from lance_table.errors import InputTypeError

__all__ = [
    "FixedSizeListMixin",
    "MultiVector",
    "Vector",
    "get_extras",
    "is_nullable",
    "model_table",
    "pydantic_to_schema",
    "snake_case",
]

# The Arrow types of plain Python annotations (checked by identity: ``datetime`` is a ``date``).
_SCALARS: dict[type, pa.DataType] = {
    int: pa.int64(),
    float: pa.float64(),
    str: pa.utf8(),
    bool: pa.bool_(),
    bytes: pa.binary(),
    dt.date: pa.date32(),
}


_FLOAT32 = pa.float32()


class FixedSizeListMixin(ABC):
    """The base of the :func:`Vector` and :func:`MultiVector` field types: their dimension and
    value type.

    Example:
        ```python
        from lance_table.pydantic import FixedSizeListMixin, Vector

        assert issubclass(Vector(8), FixedSizeListMixin) and Vector(8).dim() == 8
        ```
    """

    @staticmethod
    @abstractmethod
    def dim() -> int:
        """The number of values of one vector."""

    @staticmethod
    @abstractmethod
    def value_arrow_type() -> pa.DataType:
        """The Arrow type of the values."""


def _float_list(dim: int | None) -> CoreSchema:
    if dim is None:
        return core_schema.list_schema(items_schema=core_schema.float_schema())
    return core_schema.list_schema(min_length=dim, max_length=dim, items_schema=core_schema.float_schema())


def Vector(dim: int, value_type: pa.DataType = _FLOAT32, nullable: bool = True) -> type[FixedSizeListMixin]:
    """A field type of one embedding vector of ``dim`` values: ``fixed_size_list<value_type>[dim]``
    in the schema, a list of ``dim`` floats in the model (pydantic checks the length).

    Example:
        ```python
        import pydantic
        from lance_table.pydantic import Vector, pydantic_to_schema

        class Doc(pydantic.BaseModel):
            id: int
            embedding: Vector(3)

        assert pydantic_to_schema(Doc).field("embedding").type == pa.list_(pa.float32(), 3)
        ```
    """

    return _vector_type("FixedSizeList", dim, value_type, nullable, _float_list(dim), multi=False)


def MultiVector(
    dim: int, value_type: pa.DataType = _FLOAT32, nullable: bool = True
) -> type[FixedSizeListMixin]:
    """A field type of any number of vectors of ``dim`` values each (multi-vector embeddings):
    ``list<fixed_size_list<value_type>[dim]>`` in the schema.

    Example:
        ```python
        import pydantic
        from lance_table.pydantic import MultiVector, pydantic_to_schema

        Page = pydantic.create_model("Page", patches=(MultiVector(2), ...))

        assert pydantic_to_schema(Page).field("patches").type == pa.list_(pa.list_(pa.float32(), 2))
        ```
    """

    items = core_schema.list_schema(items_schema=_float_list(dim))
    return _vector_type("MultiVectorList", dim, value_type, nullable, items, multi=True)


def _vector_type(
    name: str, dim: int, value_type: pa.DataType, nullable: bool, checked: CoreSchema, multi: bool
) -> type[FixedSizeListMixin]:
    """The class ``name`` of a :func:`Vector` (``multi`` False) or :func:`MultiVector` (True)
    field type: pydantic checks its values against ``checked``."""

    class VectorList(list, FixedSizeListMixin):
        def __repr__(self) -> str:
            return f"{'MultiVector' if multi else 'FixedSizeList'}(dim={dim})"

        @staticmethod
        def nullable() -> bool:
            return nullable

        @staticmethod
        def dim() -> int:
            return dim

        @staticmethod
        def value_arrow_type() -> pa.DataType:
            return value_type

        @classmethod
        def __get_pydantic_core_schema__(
            cls, source: Any, handler: pydantic.GetCoreSchemaHandler
        ) -> CoreSchema:
            return core_schema.no_info_after_validator_function(cls, checked)

        @staticmethod
        def is_multi_vector() -> bool:
            return multi

    VectorList.__name__ = VectorList.__qualname__ = name
    return VectorList


def get_extras(field: Any, key: str) -> Any:
    """The ``key`` entry of a field's ``json_schema_extra`` (None when absent).

    Example:
        ```python
        import pydantic
        from lance_table.pydantic import get_extras

        class Event(pydantic.BaseModel):
            at: datetime.datetime = pydantic.Field(json_schema_extra={"tz": "UTC"})

        assert get_extras(Event.model_fields["at"], "tz") == "UTC"
        ```
    """
    extra = getattr(field, "json_schema_extra", None)
    return extra.get(key) if isinstance(extra, dict) else None


def _optional_of(annotation: Any) -> Any | None:
    """``X`` of ``Optional[X]`` / ``X | None`` (one type besides None), else None."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(rest) < len(args):
            return rest[0]
    return None


def _subclass(annotation: Any, base: type) -> bool:
    return (
        inspect.isclass(annotation)
        and not isinstance(annotation, types.GenericAlias)
        and issubclass(annotation, base)
    )


def _vector(annotation: Any) -> bool:
    """A :func:`Vector`/:func:`MultiVector` type (or pylance's own, which models written for
    pylance use)."""
    return _subclass(annotation, FixedSizeListMixin) or (
        _subclass(annotation, list) and callable(getattr(annotation, "value_arrow_type", None))
    )


def _enum_type(annotation: type[enum.Enum], field: Any) -> pa.DataType:
    kinds = {type(member.value) for member in annotation}
    if len(kinds) != 1:
        return pa.utf8()
    kind = kinds.pop()
    if kind is str:
        return pa.dictionary(pa.int32(), pa.utf8())
    return _arrow_type(kind, field)


def _list_type(annotation: Any, field: Any) -> pa.DataType:
    args = typing.get_args(annotation)
    if not args:
        raise TypeError(
            f"Converting Pydantic type to Arrow Type: unsupported type {annotation}. "
            "Specify the element type, e.g. List[int] instead of a bare List."
        )
    item = _optional_of(args[0])
    return pa.list_(pa.field("item", _arrow_type(args[0] if item is None else item, field), True))


def _arrow_type(annotation: Any, field: Any) -> pa.DataType:
    """The Arrow type of an annotation (its ``Optional`` already removed) of ``field``."""
    if _subclass(annotation, pydantic.BaseModel):
        return pa.struct(_fields(annotation))
    if _vector(annotation):
        vector = pa.list_(annotation.value_arrow_type(), annotation.dim())
        return pa.list_(vector) if getattr(annotation, "is_multi_vector", bool)() else vector
    if _subclass(annotation, enum.Enum):
        return _enum_type(annotation, field)
    if annotation is dt.datetime:
        return pa.timestamp("us", tz=get_extras(field, "tz"))
    for kind, arrow in _SCALARS.items():
        if annotation is kind:
            return arrow
    if annotation in (list, tuple) or typing.get_origin(annotation) in (list, tuple):  # also typing.List
        return _list_type(annotation, field)
    raise TypeError(f"Converting Pydantic type to Arrow Type: unsupported type {annotation}.")


def is_nullable(field: Any) -> bool:
    """Whether a model field's column is nullable: its annotation admits None, or it is a
    nullable ``Vector``/``MultiVector`` (a default value does not make a field nullable).

    Example:
        ```python
        from typing import Optional
        import pydantic
        from lance_table.pydantic import is_nullable

        class Row(pydantic.BaseModel):
            a: Optional[int] = None
            b: int = 3

        assert is_nullable(Row.model_fields["a"]) and not is_nullable(Row.model_fields["b"])
        ```
    """
    annotation = field.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    if _vector(annotation):
        return bool(annotation.nullable())
    return False


def _field(name: str, field: Any) -> pa.Field:
    annotation = field.annotation
    inner = _optional_of(annotation)
    return pa.field(name, _arrow_type(annotation if inner is None else inner, field), is_nullable(field))


def _fields(model: type[pydantic.BaseModel]) -> list[pa.Field]:
    return [_field(name, field) for name, field in model.model_fields.items()]


def pydantic_to_schema(model: type[pydantic.BaseModel]) -> pa.Schema:
    """The Arrow schema of a pydantic model's rows, as pylance makes it (see the module for the
    types).

    Raises:
        TypeError: a field's annotation has no Arrow type.

    Example:
        ```python
        from typing import List, Optional
        import pydantic
        from lance_table.pydantic import pydantic_to_schema

        class Row(pydantic.BaseModel):
            id: int
            tags: List[str]
            note: Optional[str] = None

        assert pydantic_to_schema(Row) == pa.schema(
            [
                pa.field("id", pa.int64(), False),
                pa.field("tags", pa.list_(pa.utf8()), False),
                pa.field("note", pa.utf8()),
            ]
        )
        ```
    """
    return pa.schema(_fields(model))


def snake_case(name: str) -> str:
    """A class name in snake case (``MyRows`` -> ``my_rows``): the default dataset path of
    ``LanceDataset.from_pydantic_model``, as pylance names it.

    Example:
        ```python
        from lance_table.pydantic import snake_case

        assert snake_case("UserEvent") == "user_event"
        ```
    """
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def model_table(
    data: Sequence[Any], model_class: type | None = None, schema: pa.Schema | None = None
) -> pa.Table:
    """The rows of a list of instances of one pydantic model (``model_class``, or the first item's
    class) as a table of ``schema`` (default: the model's schema); each instance's
    ``model_dump()`` is a row.

    Raises:
        InputTypeError: ``data`` is not a list, or an item is not exactly of the model's class
            (a subclass may have fields the schema lacks; also a TypeError).
        ValueError: ``data`` is empty.
        pyarrow.ArrowInvalid: a value does not convert to its column's type (as in pylance: an
            ``Enum`` field whose values are not strings).

    Example:
        ```python
        import pydantic
        from lance_table.pydantic import model_table

        class Row(pydantic.BaseModel):
            id: int

        assert model_table([Row(id=1), Row(id=2)]).column("id").to_pylist() == [1, 2]
        ```
    """
    if not isinstance(data, list):
        raise InputTypeError(f"Pydantic model data must be provided as a list, got {type(data)!r}")
    if not data:
        raise ValueError("`data` must be a non-empty list of Pydantic model instances.")
    model = type(data[0]) if model_class is None else model_class
    for i, item in enumerate(data):
        if type(item) is not model:
            raise InputTypeError(
                f"data[{i}] must be an instance of {model!r} exactly (subclasses are not accepted), "
                f"got {type(item)!r} (data has {len(data)} items)"
            )
    rows = [item.model_dump() for item in data]
    return pa.Table.from_pylist(rows, schema=pydantic_to_schema(model) if schema is None else schema)
