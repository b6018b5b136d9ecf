"""What pylance's ``describe_indices`` / ``list_indices`` / ``has_index`` tell of a version's
indices, read from its manifest alone (no index file is opened).

lance_table neither builds nor reads indices; ``create_index`` and its relatives raise
:class:`~lance_table.errors.UnsupportedOperationError`.
"""

from __future__ import annotations

import datetime as dt
import uuid as uuid_mod
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap

from lance_table.format.manifest import Manifest
from lance_table.table.indices import (
    FRAG_REUSE_INDEX_NAME,
    IndexMetadata,
    VersionsLoader,
    covered_fragments,
    decode_section,
    reuse_moves,
)

# pylance's index type names, by the suffix of the index details' type url
_SCALAR_TYPES = {
    "BTreeIndexDetails": "BTree",
    "BitmapIndexDetails": "Bitmap",
    "LabelListIndexDetails": "LabelList",
    "InvertedIndexDetails": "Inverted",
    "NGramIndexDetails": "NGram",
    "ZoneMapIndexDetails": "ZoneMap",
    "BloomFilterIndexDetails": "BloomFilter",
    "JsonIndexDetails": "Json",
    "RTreeIndexDetails": "RTree",
    "FMIndexDetails": "FM",
    "MinHashLshIndexDetails": "MinHashLsh",
    "FragmentReuseIndexDetails": "FragmentReuse",
    "MemWalIndexDetails": "MemWal",
}
# VectorIndexDetails: field 3 holds the HNSW settings; the compression is field 4/5/6/8
_VECTOR_COMPRESSION = {4: "PQ", 5: "SQ", 6: "RQ", 8: "FLAT"}


@dataclass(frozen=True)
class IndexSegmentDescription:
    """One segment of an index (pylance's ``IndexSegmentDescription``)."""

    uuid: str
    dataset_version_at_last_update: int
    fragment_ids: BitMap
    index_version: int
    created_at: dt.datetime | None
    size_bytes: int | None
    base_id: int | None
    covering_fields: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class IndexDescription:
    """One index, all its segments (pylance's ``IndexDescription``). ``details`` is left empty:
    lance_table does not decode index-type details."""

    name: str
    type_url: str
    index_type: str
    num_rows_indexed: int
    fields: list[int]
    field_names: list[str]
    segments: list[IndexSegmentDescription]
    details: dict[str, Any] = field(default_factory=dict)
    total_size_bytes: int | None = None


def _top_level_fields(data: bytes) -> set[int]:
    """The field numbers present at the top level of a serialized protobuf message."""
    out, pos = set(), 0

    def varint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    try:
        while pos < len(data):
            key = varint()
            number, wire = key >> 3, key & 7
            out.add(number)
            if wire == 0:
                varint()
            elif wire == 1:
                pos += 8
            elif wire == 2:
                size = varint()  # (read before moving: ``pos += varint()`` would add to the old pos)
                pos += size
            elif wire == 5:
                pos += 4
            else:
                break
    except IndexError:
        pass
    return out


def index_type(idx: IndexMetadata) -> str:
    """pylance's name for the index's type, from its details' type url."""
    if idx.name == FRAG_REUSE_INDEX_NAME:
        return "FragmentReuse"
    url = idx.index_details.type_url if idx.HasField("index_details") else ""
    suffix = url.rsplit(".", 1)[-1]
    if suffix == "VectorIndexDetails":
        present = _top_level_fields(idx.index_details.value)
        kind = next((name for number, name in _VECTOR_COMPRESSION.items() if number in present), None)
        if kind is None:
            return "Vector"
        return "IVF_" + ("HNSW_" if 3 in present else "") + kind
    return _SCALAR_TYPES.get(suffix, suffix.removesuffix("IndexDetails") or "Unknown")


def describe_indices(manifest: Manifest, load: VersionsLoader | None = None) -> list[IndexDescription]:
    """The indices of a version, one description per index name, by name; ``load`` reads the
    fragment reuse records kept in their own file (past 200 KiB)."""
    indices = decode_section(manifest.index_section)
    moves = reuse_moves(indices, load)
    names = {f.id: f.name for f in manifest.fields}
    rows = {f.id: f.num_rows for f in manifest.fragments}
    by_name: dict[str, list[IndexMetadata]] = {}
    for idx in indices:
        by_name.setdefault(idx.name, []).append(idx)
    out = []
    for name in sorted(by_name):
        same = by_name[name]
        segments = []
        covered = BitMap()
        for idx in same:
            frags = covered_fragments(idx, moves)
            covered |= frags
            files = getattr(idx, "files", ())
            segments.append(
                IndexSegmentDescription(
                    uuid=str(uuid_mod.UUID(bytes=idx.uuid.uuid)),
                    dataset_version_at_last_update=idx.dataset_version,
                    fragment_ids=frags,
                    index_version=idx.index_version,
                    created_at=dt.datetime.fromtimestamp(idx.created_at / 1000, dt.timezone.utc)
                    if idx.HasField("created_at")
                    else None,
                    size_bytes=sum(f.size_bytes for f in files) if files else None,
                    base_id=idx.base_id if idx.HasField("base_id") else None,
                    covering_fields=list(getattr(idx, "covering_fields", ())),
                )
            )
        sizes = [s.size_bytes for s in segments if s.size_bytes is not None]
        first = same[0]
        out.append(
            IndexDescription(
                name=name,
                type_url=first.index_details.type_url if first.HasField("index_details") else "",
                index_type=index_type(first),
                num_rows_indexed=sum(rows.get(f, 0) for f in covered),
                fields=list(first.fields),
                field_names=[names.get(f, str(f)) for f in first.fields],
                segments=segments,
                total_size_bytes=sum(sizes) if sizes else None,
            )
        )
    return out


def list_indices(manifest: Manifest, load: VersionsLoader | None = None) -> list[dict[str, Any]]:
    """pylance's ``list_indices`` rows: one dict per index segment."""
    return [
        {
            "name": d.name,
            "type": d.index_type,
            "uuid": s.uuid,
            "fields": d.field_names,
            "version": s.dataset_version_at_last_update,
            "fragment_ids": s.fragment_ids,
            "base_id": s.base_id,
        }
        for d in describe_indices(manifest, load)
        for s in d.segments
    ]


def unsupported(method: str) -> str:
    """The message of the error the index-writing methods raise."""
    return (
        f"Dataset.{method} is not supported: lance_table reads and keeps pylance's index metadata but "
        "does not build or read index files; use pylance for it"
    )
