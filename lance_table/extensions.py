"""Arrow extension types in Lance schemas, stored and read back as pylance does.

A field of an extension type is stored as its storage type with the field metadata
``ARROW:extension:name`` and ``ARROW:extension:metadata`` (``arrow.fixed_shape_tensor``,
``lance.bfloat16``, ``arrow.uuid``, any Python-defined type). ``arrow.json`` is the exception: its
text is stored as JSONB (:mod:`lance_table.jsonb`) under the logical type ``json`` and the name
``lance.json``, and reads back as ``arrow.json`` text.

Reading rebuilds an extension type through pyarrow's registry, as pyarrow does for data it
imports: a type nobody registered stays its storage type with the two metadata keys, exactly as
pyarrow leaves it; ``lance.bfloat16`` then reads as lance_table's own type (:mod:`lance_table.arrow`).

Inside lance_table (codecs, the write path) columns keep their storage types; :func:`storage_schema`
and :func:`to_storage` convert on the way in, :func:`user_schema` and :func:`to_user` on the way out.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Mapping

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.jsonb import decode_array, encode_array

EXT_NAME = b"ARROW:extension:name"
EXT_METADATA = b"ARROW:extension:metadata"
ARROW_JSON = "arrow.json"
LANCE_JSON = b"lance.json"
# Extension names the table layer handles itself (blob columns) and this module leaves alone.
_OWN_PREFIX = b"lance.blob"
BFLOAT16 = b"lance.bfloat16"


class _CSchema(ctypes.Structure):
    """The Arrow C data interface's ``ArrowSchema`` (enough to read a type's metadata)."""

    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _exported_metadata(t: pa.DataType) -> dict[bytes, bytes]:
    """The field metadata Arrow writes for a type when it exports it (its extension name and
    serialized parameters, for built-in C++ extension types that have no Python serializer)."""
    capsule = pa.field("x", t).__arrow_c_schema__()
    schema = _CSchema.from_address(_capsule_pointer(capsule, b"arrow_schema"))
    out: dict[bytes, bytes] = {}
    if not schema.metadata:
        return out
    base = schema.metadata
    (n,) = struct.unpack("<i", ctypes.string_at(base, 4))
    pos = 4
    for _ in range(n):
        (size,) = struct.unpack("<i", ctypes.string_at(base + pos, 4))
        key = ctypes.string_at(base + pos + 4, size)
        pos += 4 + size
        (size,) = struct.unpack("<i", ctypes.string_at(base + pos, 4))
        out[key] = ctypes.string_at(base + pos + 4, size)
        pos += 4 + size
    return out  # (the capsule releases the exported schema when it is collected)


def extension_metadata(t: pa.BaseExtensionType) -> tuple[bytes, bytes]:
    """The (name, serialized parameters) Arrow stores for an extension type."""
    if isinstance(t, pa.ExtensionType):  # defined in Python
        return t.extension_name.encode(), t.__arrow_ext_serialize__()
    md = _exported_metadata(t)
    return md.get(EXT_NAME, t.extension_name.encode()), md.get(EXT_METADATA, b"")


def _is_json(t: pa.DataType) -> bool:
    return isinstance(t, pa.BaseExtensionType) and t.extension_name == ARROW_JSON


def is_json_field(f: pa.Field) -> bool:
    """Whether an Arrow field is stored as Lance JSON: an ``arrow.json`` field (data written), or
    the ``lance.json`` storage field of a Lance schema."""
    return _is_json(f.type) or (
        pa.types.is_large_binary(f.type) and (f.metadata or {}).get(EXT_NAME) == LANCE_JSON
    )


# -- into storage --------------------------------------------------------------------------------


def storage_field(f: pa.Field) -> pa.Field:
    """A field with extension types (at any depth) replaced by their storage types, the extension
    recorded in the field metadata as Lance stores it."""
    t = f.type
    md = dict(f.metadata or {})
    if isinstance(t, pa.BaseExtensionType) and not t.extension_name.encode().startswith(_OWN_PREFIX):
        if _is_json(t):
            md.update({EXT_NAME: LANCE_JSON, EXT_METADATA: b""})
            return pa.field(f.name, pa.large_binary(), f.nullable, metadata=md)
        name, params = extension_metadata(t)
        md.update({EXT_NAME: name, EXT_METADATA: params})
        return storage_field(pa.field(f.name, t.storage_type, f.nullable, metadata=md))
    inner = _storage_type(t)
    return f if inner is t else pa.field(f.name, inner, f.nullable, metadata=f.metadata)


def _storage_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        kids = [t.field(i) for i in range(t.num_fields)]
        new = [storage_field(k) for k in kids]
        return t if all(a is b for a, b in zip(kids, new)) else pa.struct(new)
    # (each read of ``value_field`` and the like makes a new Python object: read once, so that an
    # unchanged child is seen to be unchanged and the type is not built again)
    if pa.types.is_fixed_size_list(t):
        field = t.value_field
        v = storage_field(field)
        return t if v is field else pa.list_(v, t.list_size)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        field = t.value_field
        v = storage_field(field)
        if v is field:
            return t
        return pa.large_list(v) if pa.types.is_large_list(t) else pa.list_(v)
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        k, i = storage_field(key), storage_field(item)
        return t if (k is key and i is item) else pa.map_(k, i, t.keys_sorted)
    return t


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """:func:`storage_field` of every field (the schema itself when nothing changes).

    Remembered by the identity of ``schema`` (kept with its result, so that its id stays its
    own; a schema never changes): a stream of appends to one dataset writes the dataset's one
    schema object each time, whose fields would otherwise be looked through at every write."""
    hit = _STORAGE_SCHEMAS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    fields = [schema.field(i) for i in range(len(schema))]
    new = [storage_field(f) for f in fields]
    out = schema if all(a is b for a, b in zip(fields, new)) else pa.schema(new, metadata=schema.metadata)
    _STORAGE_SCHEMAS.put(id(schema), (schema, out))
    return out


#: recent schemas and their :func:`storage_schema` (see there)
_STORAGE_SCHEMAS: LRU[int, tuple[pa.Schema, pa.Schema]] = LRU(32)


def to_storage(arr: pa.Array, target: pa.Field, what: str) -> pa.Array:
    """``arr`` (of a data field) as the storage field ``target`` of :func:`storage_field` holds it:
    extension arrays unwrapped, ``arrow.json`` text encoded as JSONB.

    Raises:
        SchemaError: a JSON value is not JSON.
    """
    if is_json_field(target) and not pa.types.is_large_binary(arr.type):
        return encode_array(arr, what)
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if arr.type == target.type:
        return arr
    tt = target.type
    if pa.types.is_struct(tt) and pa.types.is_struct(arr.type):
        kids = []
        for i in range(tt.num_fields):
            name = tt.field(i).name
            kids.append(to_storage(arr.field(name), tt.field(i), f"{what}.{name}"))
        return pa.StructArray.from_arrays(kids, fields=list(tt), mask=_mask(arr))
    if (pa.types.is_list(tt) or pa.types.is_large_list(tt)) and type(arr.type) is type(tt):
        values = to_storage(arr.values, tt.value_field, what)
        cls = pa.LargeListArray if pa.types.is_large_list(tt) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=tt, mask=_mask(arr))
    if pa.types.is_fixed_size_list(tt) and pa.types.is_fixed_size_list(arr.type):
        flat = arr.values.slice(arr.offset * tt.list_size, len(arr) * tt.list_size)
        values = to_storage(flat, tt.value_field, what)
        return pa.FixedSizeListArray.from_arrays(values, type=tt, mask=_mask(arr))
    return arr


def _mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


def needs_storage(schema: pa.Schema) -> bool:
    """Whether any field of ``schema`` holds an extension type."""
    return storage_schema(schema) is not schema


# -- out of storage ------------------------------------------------------------------------------


_FOUND: dict[tuple[pa.DataType, bytes, bytes], pa.DataType] = {}


def _registered(storage: pa.DataType, name: bytes, params: bytes) -> pa.DataType | None:
    """The extension type registered under ``name`` for this storage, as pyarrow rebuilds it on
    import; None when none is (or it refuses the parameters). Types found are remembered; a miss
    is asked again, since the type may be registered later (by importing pylance, say)."""
    key = (storage, name, params)
    found = _FOUND.get(key)
    if found is not None:
        return found
    md = {EXT_NAME: name, EXT_METADATA: params}
    probe = pa.schema([pa.field("x", storage, metadata=md)])
    try:
        t = pa.ipc.read_schema(pa.py_buffer(probe.serialize())).field(0).type
    except (pa.ArrowException, ValueError, TypeError):
        return None
    if not isinstance(t, pa.BaseExtensionType):
        return None
    if t.storage_type != storage and isinstance(t, pa.FixedShapeTensorType):
        # a tensor of an extension nobody registered (bfloat16): its values as given
        if not pa.types.is_fixed_size_list(storage):
            return None
        t = pa.fixed_shape_tensor(
            storage.value_type, t.shape, dim_names=t.dim_names, permutation=t.permutation
        )
    if len(_FOUND) < 1024:
        _FOUND[key] = t
    return t


def _own(storage: pa.DataType, name: bytes, params: bytes) -> pa.DataType | None:
    """lance_table's own type for an extension nobody registered (``lance.bfloat16``, the image
    types; see :mod:`lance_table.arrow`), or None."""
    if name == BFLOAT16 and storage == pa.binary(2):
        from lance_table.arrow import BFloat16Type

        return BFloat16Type()
    if name.startswith(b"lance.arrow."):
        from lance_table.arrow_images import own_image_type

        return own_image_type(storage, name, params)
    return None


def user_field(f: pa.Field, json: bool = True) -> pa.Field:
    """The field as readers see it: Lance JSON as ``arrow.json`` text (with ``json``; else its
    stored bytes, as pylance's file reader gives them), other extension fields as their registered
    extension type (metadata keys dropped, as pyarrow drops them), at any depth."""
    md = dict(f.metadata or {})
    name = md.get(EXT_NAME)
    if name == LANCE_JSON and not json:
        return f
    if name is not None and not name.startswith(_OWN_PREFIX):
        rest = {k: v for k, v in md.items() if k not in (EXT_NAME, EXT_METADATA)} or None
        if name == LANCE_JSON and pa.types.is_large_binary(f.type):
            return pa.field(f.name, pa.json_(), f.nullable, metadata=rest)
        inner = _user_type(f.type, json)
        params = md.get(EXT_METADATA, b"")
        ext = _registered(inner, name, params) or _own(inner, name, params)
        if ext is not None:
            return pa.field(f.name, ext, f.nullable, metadata=rest)
        return f if inner is f.type else pa.field(f.name, inner, f.nullable, metadata=f.metadata)
    inner = _user_type(f.type, json)
    return f if inner is f.type else pa.field(f.name, inner, f.nullable, metadata=f.metadata)


def _user_type(t: pa.DataType, json: bool) -> pa.DataType:
    if pa.types.is_struct(t):
        kids = [t.field(i) for i in range(t.num_fields)]
        new = [user_field(k, json) for k in kids]
        return t if all(a is b for a, b in zip(kids, new)) else pa.struct(new)
    if pa.types.is_fixed_size_list(t):
        v = user_field(t.value_field, json)
        return t if v is t.value_field else pa.list_(v, t.list_size)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        v = user_field(t.value_field, json)
        if v is t.value_field:
            return t
        return pa.large_list(v) if pa.types.is_large_list(t) else pa.list_(v)
    if pa.types.is_map(t):
        k, i = user_field(t.key_field, json), user_field(t.item_field, json)
        return t if (k is t.key_field and i is t.item_field) else pa.map_(k, i, t.keys_sorted)
    return t


def user_schema(schema: pa.Schema, json: bool = True) -> pa.Schema:
    """:func:`user_field` of every field (the schema itself when nothing changes)."""
    fields = [schema.field(i) for i in range(len(schema))]
    new = [user_field(f, json) for f in fields]
    if all(a is b for a, b in zip(fields, new)):
        return schema
    return pa.schema(new, metadata=schema.metadata)


def to_user(
    arr: pa.Array | pa.ChunkedArray, stored: pa.Field, target: pa.Field
) -> pa.Array | pa.ChunkedArray:
    """``arr`` of the storage field ``stored`` as the reader field ``target`` (:func:`user_field`).

    Raises:
        CorruptFileError: a JSON value is not JSONB.
    """
    if stored.type == target.type:
        return arr
    if isinstance(arr, pa.ChunkedArray):
        chunks = [to_user(c, stored, target) for c in arr.chunks]
        return pa.chunked_array(chunks, type=target.type)
    if is_json_field(stored) and _is_json(target.type):
        return decode_array(arr, stored.name)
    tt = target.type
    if pa.types.is_struct(tt):
        kids = [to_user(arr.field(i), stored.type.field(i), tt.field(i)) for i in range(tt.num_fields)]
        return pa.StructArray.from_arrays(kids, fields=list(tt), mask=_mask(arr))
    if pa.types.is_list(tt) or pa.types.is_large_list(tt):
        values = to_user(arr.values, stored.type.value_field, tt.value_field)
        cls = pa.LargeListArray if pa.types.is_large_list(tt) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=tt, mask=_mask(arr))
    if pa.types.is_fixed_size_list(tt):
        n = tt.list_size
        flat = arr.values.slice(arr.offset * n, len(arr) * n)
        values = to_user(flat, stored.type.value_field, tt.value_field)
        return pa.FixedSizeListArray.from_arrays(values, type=tt, mask=_mask(arr))
    if isinstance(tt, pa.BaseExtensionType):
        if arr.type != tt.storage_type:  # its storage holds extension values too (a bfloat16 tensor)
            arr = to_user(arr, pa.field(stored.name, stored.type), pa.field(stored.name, tt.storage_type))
        return pa.ExtensionArray.from_storage(tt, arr)
    return arr.cast(tt)


def user_table(
    table: pa.Table, stored: pa.Schema, schema: pa.Schema | None = None, *, json: bool = True
) -> pa.Table:
    """A table of storage schema ``stored`` as readers see it (``schema``: its :func:`user_schema`
    with the same ``json``)."""
    schema = user_schema(stored, json) if schema is None else schema
    if schema is stored:
        return table
    cols = [to_user(table.column(i), stored.field(i), schema.field(i)) for i in range(table.num_columns)]
    return pa.Table.from_arrays(cols, schema=schema)


def lance_metadata(f: pa.Field) -> Mapping[bytes, bytes]:
    """The field metadata a Lance schema records for ``f`` (its :func:`storage_field`'s)."""
    return storage_field(f).metadata or {}
