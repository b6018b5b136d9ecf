"""pylance's fragment reuse index (``__lance_frag_reuse``): what a compaction records so that
indices built before it keep answering without being rewritten.

Each compaction adds a *version* to the index: per rewrite group, the old and new fragments
(id, physical rows, deleted rows) and the row addresses of the old rows it moved, as a 64-bit
roaring bitmap (empty when the dataset uses stable row ids, whose indices need no remapping).
pylance rebuilds the old-to-new address mapping from that: the moved rows, in order, fill the
new fragments in order. The details live in the index metadata itself, or, past 200 KiB, in
``_indices/<uuid>/details.binpb``.
"""

from __future__ import annotations

import struct
import time
import uuid as uuid_mod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError
from pyroaring import BitMap

from lance_table._proto import table_pb2
from lance_table.errors import CorruptFileError
from lance_table.format import paths
from lance_table.format.manifest import Fragment, Manifest
from lance_table.storage.base import Storage
from lance_table.table.indices import FRAG_REUSE_INDEX_NAME, decode_section, set_fragment_bitmap

DETAILS_FILE_NAME = "details.binpb"
DETAILS_TYPE_URL = "/lance.table.FragmentReuseIndexDetails"
# pylance keeps the details inline up to this many bytes.
INLINE_LIMIT = 204800

Details = table_pb2.FragmentReuseIndexDetails


@dataclass(frozen=True)
class MovedGroup:
    """One rewrite group of a compaction: the old fragments, each with the offsets of its rows
    that were moved (its live rows, in order), and the new fragments (with their ids)."""

    old: Sequence[tuple[Fragment, np.ndarray]]
    new: Sequence[Fragment]


def row_addresses(old: Sequence[tuple[Fragment, np.ndarray]]) -> bytes:
    """The moved rows' addresses (fragment id in the high 32 bits, offset in the low) as a
    serialized 64-bit roaring bitmap, in the portable layout pylance writes."""
    buckets = []
    for frag, offsets in sorted(old, key=lambda item: item[0].id):
        if not len(offsets):
            continue
        n = len(offsets)
        if offsets[0] == 0 and offsets[-1] == n - 1:
            bitmap = BitMap(range(n))
        else:
            bitmap = BitMap(np.asarray(offsets, dtype=np.uint32))
        bitmap.run_optimize()
        buckets.append(struct.pack("<I", frag.id) + bitmap.serialize())
    return struct.pack("<Q", len(buckets)) + b"".join(buckets)


def _digest(frag: Fragment, out: table_pb2.FragmentReuseIndexDetails.FragmentDigest) -> None:
    out.id = frag.id
    out.physical_rows = frag.physical_rows
    out.num_deleted_rows = frag.num_deleted


def load_versions(storage: Storage, idx: Any) -> list[Any]:
    """The versions a fragment reuse index records, from its metadata or its details file.

    Raises:
        CorruptFileError: the details do not parse.
    """
    index_id = uuid_mod.UUID(bytes=idx.uuid.uuid)
    try:
        details = Details.FromString(idx.index_details.value)
        if details.HasField("external"):
            ext = details.external
            data = storage.read(f"{paths.INDICES_DIR}/{index_id}/{ext.path}")[
                ext.offset : ext.offset + ext.size
            ]
            return list(Details.InlineContent.FromString(data).versions)
        return list(details.inline.versions)
    except DecodeError as exc:
        where = f"{FRAG_REUSE_INDEX_NAME} index {index_id}"
        raise CorruptFileError(where, f"fragment reuse details do not parse ({exc})") from exc


def _current_versions(storage: Storage, base: Manifest) -> tuple[list[Any], int, bytes]:
    """The versions recorded by the dataset's fragment reuse index so far, its index_version and
    its uuid (b"" when there is none).

    Raises:
        CorruptFileError: the index's details do not parse.
    """
    for idx in decode_section(base.index_section):
        if idx.name == FRAG_REUSE_INDEX_NAME:
            return load_versions(storage, idx), idx.index_version, idx.uuid.uuid
    return [], 0, b""


def next_frag_reuse_index(
    storage: Storage, base: Manifest, groups: Sequence[MovedGroup], stable_row_ids: bool
) -> tuple[bytes, bytes, list[str]]:
    """The fragment reuse index after a compaction read at ``base`` (the version its Rewrite
    commits on): the existing versions plus one for ``groups``. Returns the serialized
    ``IndexMetadata``, the uuid of the index it extends (b"" for none) and the files written for
    it (an external details file, if any).

    Raises:
        CorruptFileError: the existing index's details do not parse.
    """
    versions, index_version, extends = _current_versions(storage, base)
    content = Details.InlineContent()
    for v in versions:
        content.versions.add().CopyFrom(v)
    version = content.versions.add()
    version.dataset_version = base.version
    new_ids = []
    for group in groups:
        g = version.groups.add()
        g.changed_row_addrs = row_addresses([] if stable_row_ids else group.old)
        for frag, _ in group.old:
            _digest(frag, g.old_fragments.add())
        for frag in group.new:
            _digest(frag, g.new_fragments.add())
            new_ids.append(frag.id)
    index_id = uuid_mod.uuid4()
    details = Details()
    written = []
    encoded = content.SerializeToString()
    if len(encoded) > INLINE_LIMIT:
        path = f"{paths.INDICES_DIR}/{index_id}/{DETAILS_FILE_NAME}"
        storage.write(path, encoded)
        written.append(path)
        details.external.path = DETAILS_FILE_NAME
        details.external.offset = 0
        details.external.size = len(encoded)
    else:
        details.inline.CopyFrom(content)
    meta = table_pb2.IndexMetadata()
    meta.uuid.uuid = index_id.bytes
    meta.name = FRAG_REUSE_INDEX_NAME
    meta.dataset_version = base.version
    set_fragment_bitmap(meta, new_ids)
    meta.index_details.type_url = DETAILS_TYPE_URL
    meta.index_details.value = details.SerializeToString()
    meta.index_version = index_version
    meta.created_at = time.time_ns() // 1_000_000
    return meta.SerializeToString(), extends, written
