"""The manifest of a dataset version as a frozen dataclass, and the checks of the data formats and
schema it records.

Fragments, data files and deletion files are in :mod:`lance_table.format.fragment` (their names are
importable from here too); the manifest file's framing is in :mod:`lance_table.format.manifest_file`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_table._lru import LRU
from lance_table._proto import file_pb2, table_pb2
from lance_table.errors import (
    CorruptFileError,
    MixedFileVersionsError,
    SchemaError,
    UnsupportedFormatError,
)
from lance_table.format import flags as feature_flags
from lance_table.format import fragment_facts
from lance_table.format.fragment import (
    DELETION_ARROW,
    DELETION_BITMAP,
    FRAGMENT_CACHE_SIZE,
    LEGACY_DATA_FORMAT,
    MAX_FRAGMENT_ROWS,
    DataFile,
    DeletionFile,
    Fragment,
    assign_fragment_ids,
    check_fragments,
    checked_fragments,
    data_format_of,
)
from lance_table.format.fragment_source import FragmentSource
from lance_table.schema import LanceField, build_tree, fields_from_pb, fields_to_pb

WRITER_LIBRARY = "lance_table"
# The data file format of a new dataset, as a manifest records it (``data_format``).
DEFAULT_DATA_FORMAT = ("lance", "2.2")


class _Fragments:
    """The descriptor of :attr:`Manifest.fragments`: a tuple of fragments, given as one or as a
    :class:`FragmentSource` (a decoded manifest's), converted when first read."""

    def __get__(self, obj: object, objtype: type | None = None) -> tuple[Fragment, ...]:
        if obj is None:
            raise AttributeError("fragments")  # (for the dataclass: the field has no default)
        value = obj.__dict__["fragments"]
        if value.__class__ is FragmentSource:
            return value.fragments()
        return value

    def __set__(self, obj: object, value: tuple[Fragment, ...] | FragmentSource) -> None:
        obj.__dict__["fragments"] = value


@dataclass(frozen=True)
class Manifest:
    """One version of a dataset.

    ``fragments`` may be given as a :class:`FragmentSource`: the fragments are then converted when
    first read, and what the manifest tells of them without (:attr:`data_formats`,
    :attr:`num_rows`, :attr:`fragment_facts`, :meth:`with_flags`, :meth:`evolve`, writing it) does
    not convert them."""

    fields: tuple[LanceField, ...]
    if TYPE_CHECKING:
        fragments: tuple[Fragment, ...]
    else:
        fragments: _Fragments = _Fragments()
    version: int
    schema_metadata: Mapping[str, bytes] = field(default_factory=dict)
    timestamp_ns: int = 0
    tag: str = ""
    reader_feature_flags: int = 0
    writer_feature_flags: int = 0
    max_fragment_id: int | None = None
    transaction_file: str = ""
    writer_library: str = WRITER_LIBRARY
    writer_version: str = ""
    next_row_id: int = 0
    data_format: tuple[str, str] | None = DEFAULT_DATA_FORMAT
    config: Mapping[str, str] = field(default_factory=dict)
    table_metadata: Mapping[str, str] = field(default_factory=dict)
    # Things lance_table carries forward untouched: the index section and other manifest fields.
    index_section: bytes | None = None
    passthrough: bytes = b""
    # Legacy datasets: the values of each dictionary field, by field id (written into the manifest
    # file; data files' keys index them, and appends may only extend them).
    dictionaries: Mapping[int, pa.Array] = field(default_factory=dict, compare=False)

    @property
    def fragment_source(self) -> FragmentSource | None:
        """The fragments as decoded, when they were given so and may not be converted yet."""
        value = self.__dict__["fragments"]
        return value if value.__class__ is FragmentSource else None

    @property
    def fragment_facts(self) -> fragment_facts.FragmentFacts:
        """Facts about the fragments (formats, deletions, row ids, ids), without converting them."""
        source = self.fragment_source
        if source is not None:
            return source.facts
        return fragment_facts.facts(tuple(self.fragments))

    @cached_property
    def data_formats(self) -> frozenset[str]:
        """The data formats of the manifest's data files."""
        return self.fragment_facts.formats

    @property
    def data_storage_version(self) -> str | None:
        """The data file format version new files must use (e.g. ``"2.0"``), if recorded."""
        return self.data_format[1] if self.data_format else None

    @property
    def num_rows(self) -> int:
        source = self.fragment_source
        if source is not None:
            return source.num_rows
        return sum(f.num_rows for f in self.fragments)

    def evolve(self, **changes: Any) -> Manifest:
        """``dataclasses.replace(self, **changes)``, without converting fragments given as a
        :class:`FragmentSource` (``replace`` reads every field).

        The copy is made from this manifest's field values directly, not through ``__init__``
        (which sets each of some twenty fields through ``object.__setattr__``: a fixed cost every
        commit paid several times); what was cached of this manifest (``data_formats``) is not
        carried over.

        Raises:
            TypeError: a change names no field of the manifest (as ``replace``).
        """
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"Manifest has no field(s) {sorted(unknown)}")
        if type(self) is not Manifest:  # (a subclass may have an __init__ of its own)
            changes.setdefault("fragments", self.__dict__["fragments"])
            return replace(self, **changes)
        values = self.__dict__
        new = object.__new__(Manifest)
        new.__dict__.update({name: values[name] for name in _FIELD_NAMES_ORDERED})
        new.__dict__.update(changes)
        return new

    def with_flags(self, **changes: Any) -> Manifest:
        """This manifest with its feature flags recomputed from its contents, and ``changes``
        (:meth:`evolve`'s) made in the same copy; the changes must not be to what the flags
        depend on (fragments, config, reader flags, the carried-forward fields)."""
        found = self.fragment_facts
        reader, writer = feature_flags.compute(
            has_deletions=found.deletions,
            has_row_ids=bool(self.reader_feature_flags & feature_flags.STABLE_ROW_IDS) or found.row_ids,
            has_config=bool(self.config),
            has_base_paths=_has_base_paths(self.passthrough),
        )
        return self.evolve(**changes, reader_feature_flags=reader, writer_feature_flags=writer)

    def to_pb(
        self,
        transaction_offset: int | None,
        index_offset: int | None,
        dictionary_positions: Mapping[int, tuple[int, int]] | None = None,
        with_fragments: bool = True,
    ) -> Any:
        """The ``lance.table.Manifest`` protobuf; ``dictionary_positions`` gives the ``(offset, length)``
        of dictionary fields' values in the manifest file. Without ``with_fragments``, the
        fragments are left out (see :attr:`Fragment.manifest_entry`)."""
        pb = table_pb2.Manifest()
        if self.passthrough:
            pb.MergeFromString(self.passthrough)
        pb.MergeFromString(_fields_pb_bytes(self.fields))
        for pf in pb.fields:
            if dictionary_positions and pf.id in dictionary_positions:
                pf.dictionary.offset, pf.dictionary.length = dictionary_positions[pf.id]
        if with_fragments:
            source = self.fragment_source
            for raw in source.raws if source is not None else (f.pb_bytes for f in self.fragments):
                pb.fragments.add().MergeFromString(raw)
        pb.version = self.version
        for k, v in self.schema_metadata.items():
            pb.schema_metadata[k] = v
        if index_offset is not None:
            pb.index_section = index_offset
        pb.timestamp.seconds, pb.timestamp.nanos = divmod(self.timestamp_ns, 10**9)
        pb.tag = self.tag
        pb.reader_feature_flags = self.reader_feature_flags
        pb.writer_feature_flags = self.writer_feature_flags
        if self.max_fragment_id is not None:
            pb.max_fragment_id = self.max_fragment_id
        pb.transaction_file = self.transaction_file
        pb.writer_version.library = self.writer_library
        pb.writer_version.version = self.writer_version
        pb.next_row_id = self.next_row_id
        if self.data_format is not None:
            pb.data_format.file_format, pb.data_format.version = self.data_format
        pb.config.update(self.config)
        pb.table_metadata.update(self.table_metadata)
        if transaction_offset is not None:
            pb.transaction_section = transaction_offset
        return pb

    @classmethod
    def from_pb(
        cls,
        pb: Any,
        index_section: bytes | None = None,
        dictionaries: Mapping[int, pa.Array] | None = None,
        fragments: tuple[Fragment, ...] | FragmentSource | None = None,
        fields: tuple[LanceField, ...] | None = None,
    ) -> Manifest:
        """The manifest of protobuf ``pb``; ``fragments`` and ``fields`` are its fragments and
        schema when the caller converted them already (:func:`check_schema` returns the fields)."""
        passthrough = b""  # (an empty message's bytes: what most manifests carry)
        if len(pb.base_paths) or pb.HasField("branch") or pb.version_aux_data:
            rest = table_pb2.Manifest()
            rest.base_paths.extend(pb.base_paths)
            if pb.HasField("branch"):
                rest.branch = pb.branch
            rest.version_aux_data = pb.version_aux_data
            passthrough = rest.SerializeToString()
        values = dict(
            fields=fields if fields is not None else tuple(fields_from_pb(pb.fields)),
            fragments=cast(Any, fragments)  # (a FragmentSource too: see the fragments descriptor)
            if fragments is not None
            else tuple(Fragment.from_pb(f) for f in pb.fragments),
            version=pb.version,
            schema_metadata=_dict(pb.schema_metadata),
            timestamp_ns=pb.timestamp.seconds * 10**9 + pb.timestamp.nanos,
            tag=pb.tag,
            reader_feature_flags=pb.reader_feature_flags,
            writer_feature_flags=pb.writer_feature_flags,
            max_fragment_id=pb.max_fragment_id if pb.HasField("max_fragment_id") else None,
            transaction_file=pb.transaction_file,
            writer_library=pb.writer_version.library,
            writer_version=pb.writer_version.version,
            next_row_id=pb.next_row_id,
            data_format=(pb.data_format.file_format, pb.data_format.version)
            if pb.HasField("data_format")
            else _inferred_data_format(pb),
            config=_dict(pb.config),
            table_metadata=_dict(pb.table_metadata),
            index_section=index_section,
            passthrough=passthrough,
            dictionaries=dict(dictionaries or {}),
        )
        # every field given: set at once, not one by one through the frozen dataclass's
        # ``__init__`` (``object.__setattr__`` for each of 19 fields, on every open of a version)
        m = object.__new__(cls)
        m.__dict__.update(values)
        return m


#: the manifest's fields, in order (what :meth:`Manifest.evolve` copies)
_FIELD_NAMES_ORDERED = tuple(f.name for f in dataclass_fields(Manifest))
_FIELD_NAMES = frozenset(_FIELD_NAMES_ORDERED)


def _fields_pb_bytes(fields: tuple[LanceField, ...]) -> bytes:
    """A ``lance.table.Manifest`` message holding only ``fields`` (its schema), serialized: merged
    into the manifest being written, it makes the very message that adding each field makes.

    Remembered by the identity of the tuple (kept with its bytes, so that its id stays its own;
    fields are immutable): the versions of a stream of appends share their schema's tuple, whose
    fields would otherwise be built into a message field by field at every commit."""
    kept = type(fields) is tuple  # (a list could change under its id)
    hit = _FIELDS_PB.get(id(fields)) if kept else None
    if hit is not None and hit[0] is fields:
        return hit[1]
    pb = table_pb2.Manifest()
    fields_to_pb(fields, pb.fields)
    data = pb.SerializeToString()
    if kept:
        _FIELDS_PB.put(id(fields), (fields, data))
    return data


#: schemas recently written into manifests, serialized (see :func:`_fields_pb_bytes`)
_FIELDS_PB: LRU[int, tuple[tuple[LanceField, ...], bytes]] = LRU(16)


def _dict(pb_map: Any) -> dict[Any, Any]:
    """A protobuf map as a dict (an empty one not copied through the map's Mapping methods)."""
    return dict(pb_map) if len(pb_map) else {}


def _inferred_data_format(pb: Any) -> tuple[str, str]:
    """The data format of a manifest that does not record one (written before pylance 0.15), as
    pylance infers it: from the first data file; with no data files, 2.x if the writer flag of the
    v2 format is set (as "stable", which is the default now), else legacy."""
    for frag in pb.fragments:
        for f in frag.files:
            return ("lance", data_format_of(f.file_major_version, f.file_minor_version))
    if pb.writer_feature_flags & feature_flags.USE_V2_FORMAT_DEPRECATED:
        return DEFAULT_DATA_FORMAT
    return ("lance", LEGACY_DATA_FORMAT)


def _has_base_paths(passthrough: bytes) -> bool:
    if not passthrough:
        return False
    pb = table_pb2.Manifest()
    pb.MergeFromString(passthrough)
    return len(pb.base_paths) > 0


# Reader flag that lets data files of one dataset use different format versions.
_MIXED_FILE_VERSIONS = 256
_FORMAT_NUMBER = re.compile(r"(\d{1,9})\.(\d{1,9})")


def _check_file_versions(pb: Any, fragments: tuple[Fragment, ...], path: str) -> None:
    """All data files must be of one format: the manifest's ``data_format`` (unless the flag of mixed
    versions is set) or, when it records none, the first file's. pylance requires both."""
    if pb.reader_feature_flags & _MIXED_FILE_VERSIONS:
        return
    if pb.HasField("data_format"):
        if pb.data_format.version == LEGACY_DATA_FORMAT:
            # pylance 0.16 could record 0.1 for 2.0 files: every file is read as its own format,
            # and the next commit records the files' format (see corrected_data_format)
            return
        named = named_data_format(pb.data_format.version)
        if named is None:
            return  # a format name lance_table does not know: refused when the data is read
        expected = named
        whose = "the manifest's"
    else:
        expected = _inferred_data_format(pb)[1]
        whose = "the first data file's"
    verdicts: dict[tuple[int, int], bool] = {}  # by recorded (major, minor): whether it is expected
    for frag in fragments:
        for f in frag.files:
            pair = (f.file_major_version, f.file_minor_version)
            good = verdicts.get(pair)
            if good is None:
                good = verdicts[pair] = data_format_of(*pair) == expected
            if not good:
                actual = f.version
                raise CorruptFileError(
                    path,
                    f"data file {f.path} of fragment {frag.id} has format {actual} "
                    f"(recorded as {f.file_major_version}.{f.file_minor_version}), "
                    f"{whose} format is {expected}",
                )


def named_data_format(version: str) -> str | None:
    """The data format a manifest's ``data_format.version`` names (as :func:`data_format_of`
    names a data file's), or None for a name lance_table does not know."""
    named = _FORMAT_NUMBER.fullmatch(version)
    if named is None:
        return None
    return data_format_of(int(named.group(1)), int(named.group(2)))


def corrected_data_format(m: Manifest, path: str) -> tuple[str, str] | None:
    """The format a manifest recording the legacy format 0.1 must record instead: its data files'
    one newer format (pylance 0.16 could record 0.1 for 2.0 files; pylance fixes it at the next
    commit, as this does); None when the record is right.

    Raises:
        MixedFileVersionsError: the files are of several formats (naming ``path``).
    """
    if m.data_storage_version != LEGACY_DATA_FORMAT:
        return None
    formats = m.data_formats
    if len(formats) > 1:
        raise MixedFileVersionsError(
            f"{path}: The dataset contains a mixture of file versions.  You will need to rollback "
            f"to an earlier version: its data files are of formats {', '.join(sorted(formats))} "
            f"while the manifest records {LEGACY_DATA_FORMAT}"
        )
    if formats and next(iter(formats)) != LEGACY_DATA_FORMAT:
        return ("lance", next(iter(formats)))
    return None


def check_schema(pb_fields: Iterable[Any], where: str) -> tuple[LanceField, ...]:
    """Refuse a schema (a repeated ``lance.file.Field``) that does not form a valid field tree;
    return its fields (their tree is remembered by :func:`build_tree`: the manifest made of them
    does not convert and resolve its schema again).

    Raises:
        UnsupportedFormatError: a logical type lance_table does not know (naming ``where``).
        CorruptFileError: any other problem (repeated ids, dangling parents, bad children ...).
    """
    fields = tuple(fields_from_pb(pb_fields))
    try:
        build_tree(fields)
    except SchemaError as exc:
        if "unknown logical type" in str(exc):
            raise UnsupportedFormatError(f"schema: {exc}", path=where) from exc
        raise CorruptFileError(where, f"schema is invalid ({exc})") from exc
    return fields


def schema_of(records: Sequence[bytes], where: str) -> tuple[LanceField, ...]:
    """:func:`check_schema` of a schema given as its serialized ``lance.file.Field`` records (a
    manifest's, as :func:`~lance_table.format.fragment_source.raw_manifest` leaves them).

    The fields of the last few schemas are remembered by those exact bytes, and the same tuple
    is returned for the same bytes: the versions of a dataset mostly share one schema, and opening
    one converts and checks it (ids, parents, types: some 300 us for ten fields) again otherwise.
    The key is the whole serialized schema, so a schema that differs in any byte (another
    dataset's, a version before or after an evolution) is never served from another's entry.

    Raises:
        UnsupportedFormatError: a logical type lance_table does not know (naming ``where``).
        CorruptFileError: a record does not parse, or the fields form no valid tree.
    """
    key = tuple(records)
    hit = _SCHEMAS.get(key)
    if hit is not None:
        return hit
    fields = check_schema(parse_fields(key, where), where)
    _SCHEMAS.put(key, fields, 2 * sum(map(len, key)) + 64 * len(key))  # (their bytes and objects)
    return fields


def parse_fields(records: Iterable[bytes], where: str) -> list[Any]:
    """Serialized ``lance.file.Field`` records as protobuf messages.

    Raises:
        CorruptFileError: a record does not parse (naming ``where``).
    """
    try:
        return [file_pb2.Field.FromString(r) for r in records]
    except (DecodeError, RuntimeError) as exc:
        raise CorruptFileError(where, f"schema field does not parse ({exc})") from exc


#: schemas by their serialized field records (see :func:`schema_of`), the least recent dropped
#: first, and a schema of more than 4 MB (its records counted twice) never kept
_SCHEMAS: LRU[tuple[bytes, ...], tuple[LanceField, ...]] = LRU(32, max_bytes=8 << 20)


__all__ = [
    "DEFAULT_DATA_FORMAT",
    "DELETION_ARROW",
    "DELETION_BITMAP",
    "FRAGMENT_CACHE_SIZE",
    "LEGACY_DATA_FORMAT",
    "MAX_FRAGMENT_ROWS",
    "WRITER_LIBRARY",
    "DataFile",
    "DeletionFile",
    "Fragment",
    "FragmentSource",
    "Manifest",
    "assign_fragment_ids",
    "check_fragments",
    "check_schema",
    "checked_fragments",
    "corrected_data_format",
    "data_format_of",
    "parse_fields",
    "schema_of",
]
