from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RepDefLayer(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPDEF_UNSPECIFIED: _ClassVar[RepDefLayer]
    REPDEF_ALL_VALID_ITEM: _ClassVar[RepDefLayer]
    REPDEF_ALL_VALID_LIST: _ClassVar[RepDefLayer]
    REPDEF_NULLABLE_ITEM: _ClassVar[RepDefLayer]
    REPDEF_NULLABLE_LIST: _ClassVar[RepDefLayer]
    REPDEF_EMPTYABLE_LIST: _ClassVar[RepDefLayer]
    REPDEF_NULL_AND_EMPTY_LIST: _ClassVar[RepDefLayer]

class CompressionScheme(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSION_ALGORITHM_UNSPECIFIED: _ClassVar[CompressionScheme]
    COMPRESSION_ALGORITHM_LZ4: _ClassVar[CompressionScheme]
    COMPRESSION_ALGORITHM_ZSTD: _ClassVar[CompressionScheme]
REPDEF_UNSPECIFIED: RepDefLayer
REPDEF_ALL_VALID_ITEM: RepDefLayer
REPDEF_ALL_VALID_LIST: RepDefLayer
REPDEF_NULLABLE_ITEM: RepDefLayer
REPDEF_NULLABLE_LIST: RepDefLayer
REPDEF_EMPTYABLE_LIST: RepDefLayer
REPDEF_NULL_AND_EMPTY_LIST: RepDefLayer
COMPRESSION_ALGORITHM_UNSPECIFIED: CompressionScheme
COMPRESSION_ALGORITHM_LZ4: CompressionScheme
COMPRESSION_ALGORITHM_ZSTD: CompressionScheme

class MiniBlockLayout(_message.Message):
    __slots__ = ("rep_compression", "def_compression", "value_compression", "dictionary", "num_dictionary_items", "layers", "num_buffers", "repetition_index_depth", "num_items", "has_large_chunk")
    REP_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    DEF_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    VALUE_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    DICTIONARY_FIELD_NUMBER: _ClassVar[int]
    NUM_DICTIONARY_ITEMS_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    NUM_BUFFERS_FIELD_NUMBER: _ClassVar[int]
    REPETITION_INDEX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    NUM_ITEMS_FIELD_NUMBER: _ClassVar[int]
    HAS_LARGE_CHUNK_FIELD_NUMBER: _ClassVar[int]
    rep_compression: CompressiveEncoding
    def_compression: CompressiveEncoding
    value_compression: CompressiveEncoding
    dictionary: CompressiveEncoding
    num_dictionary_items: int
    layers: _containers.RepeatedScalarFieldContainer[RepDefLayer]
    num_buffers: int
    repetition_index_depth: int
    num_items: int
    has_large_chunk: bool
    def __init__(self, rep_compression: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., def_compression: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., value_compression: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., dictionary: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., num_dictionary_items: _Optional[int] = ..., layers: _Optional[_Iterable[_Union[RepDefLayer, str]]] = ..., num_buffers: _Optional[int] = ..., repetition_index_depth: _Optional[int] = ..., num_items: _Optional[int] = ..., has_large_chunk: _Optional[bool] = ...) -> None: ...

class FullZipLayout(_message.Message):
    __slots__ = ("bits_rep", "bits_def", "bits_per_value", "bits_per_offset", "num_items", "num_visible_items", "value_compression", "layers")
    BITS_REP_FIELD_NUMBER: _ClassVar[int]
    BITS_DEF_FIELD_NUMBER: _ClassVar[int]
    BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    BITS_PER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NUM_ITEMS_FIELD_NUMBER: _ClassVar[int]
    NUM_VISIBLE_ITEMS_FIELD_NUMBER: _ClassVar[int]
    VALUE_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    bits_rep: int
    bits_def: int
    bits_per_value: int
    bits_per_offset: int
    num_items: int
    num_visible_items: int
    value_compression: CompressiveEncoding
    layers: _containers.RepeatedScalarFieldContainer[RepDefLayer]
    def __init__(self, bits_rep: _Optional[int] = ..., bits_def: _Optional[int] = ..., bits_per_value: _Optional[int] = ..., bits_per_offset: _Optional[int] = ..., num_items: _Optional[int] = ..., num_visible_items: _Optional[int] = ..., value_compression: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., layers: _Optional[_Iterable[_Union[RepDefLayer, str]]] = ...) -> None: ...

class ConstantLayout(_message.Message):
    __slots__ = ("layers", "inline_value", "rep_compression", "def_compression", "num_rep_values", "num_def_values")
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    INLINE_VALUE_FIELD_NUMBER: _ClassVar[int]
    REP_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    DEF_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    NUM_REP_VALUES_FIELD_NUMBER: _ClassVar[int]
    NUM_DEF_VALUES_FIELD_NUMBER: _ClassVar[int]
    layers: _containers.RepeatedScalarFieldContainer[RepDefLayer]
    inline_value: bytes
    rep_compression: CompressiveEncoding
    def_compression: CompressiveEncoding
    num_rep_values: int
    num_def_values: int
    def __init__(self, layers: _Optional[_Iterable[_Union[RepDefLayer, str]]] = ..., inline_value: _Optional[bytes] = ..., rep_compression: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., def_compression: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., num_rep_values: _Optional[int] = ..., num_def_values: _Optional[int] = ...) -> None: ...

class BlobLayout(_message.Message):
    __slots__ = ("inner_layout", "layers")
    INNER_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    inner_layout: PageLayout
    layers: _containers.RepeatedScalarFieldContainer[RepDefLayer]
    def __init__(self, inner_layout: _Optional[_Union[PageLayout, _Mapping]] = ..., layers: _Optional[_Iterable[_Union[RepDefLayer, str]]] = ...) -> None: ...

class PageLayout(_message.Message):
    __slots__ = ("mini_block_layout", "constant_layout", "full_zip_layout", "blob_layout")
    MINI_BLOCK_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    CONSTANT_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    FULL_ZIP_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    BLOB_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    mini_block_layout: MiniBlockLayout
    constant_layout: ConstantLayout
    full_zip_layout: FullZipLayout
    blob_layout: BlobLayout
    def __init__(self, mini_block_layout: _Optional[_Union[MiniBlockLayout, _Mapping]] = ..., constant_layout: _Optional[_Union[ConstantLayout, _Mapping]] = ..., full_zip_layout: _Optional[_Union[FullZipLayout, _Mapping]] = ..., blob_layout: _Optional[_Union[BlobLayout, _Mapping]] = ...) -> None: ...

class BufferCompression(_message.Message):
    __slots__ = ("scheme", "level")
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    scheme: CompressionScheme
    level: int
    def __init__(self, scheme: _Optional[_Union[CompressionScheme, str]] = ..., level: _Optional[int] = ...) -> None: ...

class Flat(_message.Message):
    __slots__ = ("bits_per_value", "data")
    BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    bits_per_value: int
    data: BufferCompression
    def __init__(self, bits_per_value: _Optional[int] = ..., data: _Optional[_Union[BufferCompression, _Mapping]] = ...) -> None: ...

class Variable(_message.Message):
    __slots__ = ("offsets", "values")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    offsets: CompressiveEncoding
    values: BufferCompression
    def __init__(self, offsets: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., values: _Optional[_Union[BufferCompression, _Mapping]] = ...) -> None: ...

class Constant(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: bytes
    def __init__(self, value: _Optional[bytes] = ...) -> None: ...

class OutOfLineBitpacking(_message.Message):
    __slots__ = ("uncompressed_bits_per_value", "values")
    UNCOMPRESSED_BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    uncompressed_bits_per_value: int
    values: CompressiveEncoding
    def __init__(self, uncompressed_bits_per_value: _Optional[int] = ..., values: _Optional[_Union[CompressiveEncoding, _Mapping]] = ...) -> None: ...

class InlineBitpacking(_message.Message):
    __slots__ = ("uncompressed_bits_per_value", "values")
    UNCOMPRESSED_BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    uncompressed_bits_per_value: int
    values: BufferCompression
    def __init__(self, uncompressed_bits_per_value: _Optional[int] = ..., values: _Optional[_Union[BufferCompression, _Mapping]] = ...) -> None: ...

class Fsst(_message.Message):
    __slots__ = ("symbol_table", "values")
    SYMBOL_TABLE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    symbol_table: bytes
    values: CompressiveEncoding
    def __init__(self, symbol_table: _Optional[bytes] = ..., values: _Optional[_Union[CompressiveEncoding, _Mapping]] = ...) -> None: ...

class Dictionary(_message.Message):
    __slots__ = ("indices", "items", "num_dictionary_items")
    INDICES_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NUM_DICTIONARY_ITEMS_FIELD_NUMBER: _ClassVar[int]
    indices: CompressiveEncoding
    items: CompressiveEncoding
    num_dictionary_items: int
    def __init__(self, indices: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., items: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., num_dictionary_items: _Optional[int] = ...) -> None: ...

class Rle(_message.Message):
    __slots__ = ("values", "run_lengths")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    RUN_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    values: CompressiveEncoding
    run_lengths: CompressiveEncoding
    def __init__(self, values: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., run_lengths: _Optional[_Union[CompressiveEncoding, _Mapping]] = ...) -> None: ...

class FixedSizeList(_message.Message):
    __slots__ = ("items_per_value", "values", "has_validity")
    ITEMS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    HAS_VALIDITY_FIELD_NUMBER: _ClassVar[int]
    items_per_value: int
    values: CompressiveEncoding
    has_validity: bool
    def __init__(self, items_per_value: _Optional[int] = ..., values: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., has_validity: _Optional[bool] = ...) -> None: ...

class PackedStruct(_message.Message):
    __slots__ = ("bits_per_value", "values")
    BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    bits_per_value: _containers.RepeatedScalarFieldContainer[int]
    values: CompressiveEncoding
    def __init__(self, bits_per_value: _Optional[_Iterable[int]] = ..., values: _Optional[_Union[CompressiveEncoding, _Mapping]] = ...) -> None: ...

class VariablePackedStruct(_message.Message):
    __slots__ = ("fields",)
    class FieldEncoding(_message.Message):
        __slots__ = ("value", "bits_per_value", "bits_per_length")
        VALUE_FIELD_NUMBER: _ClassVar[int]
        BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
        BITS_PER_LENGTH_FIELD_NUMBER: _ClassVar[int]
        value: CompressiveEncoding
        bits_per_value: int
        bits_per_length: int
        def __init__(self, value: _Optional[_Union[CompressiveEncoding, _Mapping]] = ..., bits_per_value: _Optional[int] = ..., bits_per_length: _Optional[int] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedCompositeFieldContainer[VariablePackedStruct.FieldEncoding]
    def __init__(self, fields: _Optional[_Iterable[_Union[VariablePackedStruct.FieldEncoding, _Mapping]]] = ...) -> None: ...

class General(_message.Message):
    __slots__ = ("compression", "values")
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    compression: BufferCompression
    values: CompressiveEncoding
    def __init__(self, compression: _Optional[_Union[BufferCompression, _Mapping]] = ..., values: _Optional[_Union[CompressiveEncoding, _Mapping]] = ...) -> None: ...

class ByteStreamSplit(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: CompressiveEncoding
    def __init__(self, values: _Optional[_Union[CompressiveEncoding, _Mapping]] = ...) -> None: ...

class Range(_message.Message):
    __slots__ = ("bits_per_value", "start", "step")
    BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    bits_per_value: int
    start: int
    step: int
    def __init__(self, bits_per_value: _Optional[int] = ..., start: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...

class Delta(_message.Message):
    __slots__ = ("bits_per_value", "base", "deltas")
    BITS_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    bits_per_value: int
    base: int
    deltas: CompressiveEncoding
    def __init__(self, bits_per_value: _Optional[int] = ..., base: _Optional[int] = ..., deltas: _Optional[_Union[CompressiveEncoding, _Mapping]] = ...) -> None: ...

class CompressiveEncoding(_message.Message):
    __slots__ = ("flat", "variable", "constant", "out_of_line_bitpacking", "inline_bitpacking", "fsst", "dictionary", "rle", "byte_stream_split", "general", "fixed_size_list", "packed_struct", "variable_packed_struct", "range", "delta")
    FLAT_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_FIELD_NUMBER: _ClassVar[int]
    CONSTANT_FIELD_NUMBER: _ClassVar[int]
    OUT_OF_LINE_BITPACKING_FIELD_NUMBER: _ClassVar[int]
    INLINE_BITPACKING_FIELD_NUMBER: _ClassVar[int]
    FSST_FIELD_NUMBER: _ClassVar[int]
    DICTIONARY_FIELD_NUMBER: _ClassVar[int]
    RLE_FIELD_NUMBER: _ClassVar[int]
    BYTE_STREAM_SPLIT_FIELD_NUMBER: _ClassVar[int]
    GENERAL_FIELD_NUMBER: _ClassVar[int]
    FIXED_SIZE_LIST_FIELD_NUMBER: _ClassVar[int]
    PACKED_STRUCT_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_PACKED_STRUCT_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    flat: Flat
    variable: Variable
    constant: Constant
    out_of_line_bitpacking: OutOfLineBitpacking
    inline_bitpacking: InlineBitpacking
    fsst: Fsst
    dictionary: Dictionary
    rle: Rle
    byte_stream_split: ByteStreamSplit
    general: General
    fixed_size_list: FixedSizeList
    packed_struct: PackedStruct
    variable_packed_struct: VariablePackedStruct
    range: Range
    delta: Delta
    def __init__(self, flat: _Optional[_Union[Flat, _Mapping]] = ..., variable: _Optional[_Union[Variable, _Mapping]] = ..., constant: _Optional[_Union[Constant, _Mapping]] = ..., out_of_line_bitpacking: _Optional[_Union[OutOfLineBitpacking, _Mapping]] = ..., inline_bitpacking: _Optional[_Union[InlineBitpacking, _Mapping]] = ..., fsst: _Optional[_Union[Fsst, _Mapping]] = ..., dictionary: _Optional[_Union[Dictionary, _Mapping]] = ..., rle: _Optional[_Union[Rle, _Mapping]] = ..., byte_stream_split: _Optional[_Union[ByteStreamSplit, _Mapping]] = ..., general: _Optional[_Union[General, _Mapping]] = ..., fixed_size_list: _Optional[_Union[FixedSizeList, _Mapping]] = ..., packed_struct: _Optional[_Union[PackedStruct, _Mapping]] = ..., variable_packed_struct: _Optional[_Union[VariablePackedStruct, _Mapping]] = ..., range: _Optional[_Union[Range, _Mapping]] = ..., delta: _Optional[_Union[Delta, _Mapping]] = ...) -> None: ...
