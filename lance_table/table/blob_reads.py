"""``read_blobs`` and ``read_blob_ranges``: blob bytes read whole, or by ranges, into memory
(pylance's planned blob readers). Rows are selected as in ``take_blobs``
(:func:`~lance_table.table.blobs.addressed_blobs`); each blob is read with one ranged read of its
file, and several ranges of one blob with one :meth:`BlobFile.read_ranges` call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from lance_table.errors import BlobValueError
from lance_table.table.blobs import BlobFile, addressed_blobs
from lance_table.table.snapshot import Snapshot

SELECTORS = ("ids", "addresses", "indices")
_MAX_U64 = 2**64 - 1

Selection: TypeAlias = Sequence[int] | np.ndarray | pa.Array | None


def read_blobs(
    snapshot: Snapshot,
    column: str,
    ids: Selection = None,
    addresses: Selection = None,
    indices: Selection = None,
    *,
    allow_external: bool = False,
) -> list[tuple[int, bytes | None]]:
    """``(row address, bytes)`` of each selected row's blob, in the order selected; None for a
    null blob, ``b""`` for an empty one.

    Raises:
        ValueError: not exactly one selection; other errors as ``take_blobs``.
    """
    found = addressed_blobs(
        snapshot, column, ids=ids, addresses=addresses, indices=indices, allow_external=allow_external
    )
    return [(address, None if blob is None else blob.readall()) for address, blob in found]


def read_blob_ranges(
    snapshot: Snapshot,
    column: str,
    requests: Sequence[tuple[int, int, int]],
    selector: str,
    *,
    allow_external: bool = False,
) -> list[tuple[int, int, bytes | None]]:
    """``(request index, row address, bytes)`` for each ``(row, offset, length)`` request, rows
    named as ``selector`` says (``"ids"``, ``"addresses"`` or ``"indices"``), in request order.
    A request on a null blob gives None (whatever its range); an empty range ``b""``.

    Raises:
        BlobValueError: an unknown selector, a request that is not three ints, a negative offset
            or length, or a range past the end of its blob (ValueErrors).
        IndexError: a row that does not exist; other errors as ``take_blobs``.
    """
    if selector not in SELECTORS:
        raise BlobValueError(f"selector must be one of {', '.join(SELECTORS)}; got {selector!r}")
    rows, ranges = [], []
    for i, request in enumerate(requests):
        try:
            row, offset, length = (int(x) for x in request)
        except (TypeError, ValueError):
            raise BlobValueError(f"request {i} is not a (row, offset, length) tuple: {request!r}") from None
        if offset < 0 or length < 0 or offset + length > _MAX_U64:
            raise BlobValueError(f"request {i}: offset {offset} and length {length} must be u64s")
        rows.append(row)
        ranges.append((offset, length))
    if not rows:
        return []
    unique, first = np.unique(np.asarray(rows, np.int64), return_inverse=True)
    chosen = {k: (unique if k == selector else None) for k in SELECTORS}
    found = addressed_blobs(
        snapshot,
        column,
        ids=chosen["ids"],
        addresses=chosen["addresses"],
        indices=chosen["indices"],
        allow_external=allow_external,
    )
    wanted: dict[int, list[int]] = {}
    for i, k in enumerate(first.tolist()):
        wanted.setdefault(k, []).append(i)
    out: list[tuple[int, int, bytes | None]] = [(0, 0, None)] * len(rows)
    for k, requests_of in wanted.items():
        address, blob = found[k]
        for i, data in zip(requests_of, _ranges(blob, [ranges[i] for i in requests_of], requests_of)):
            out[i] = (i, address, data)
    return out


def _ranges(blob: BlobFile | None, ranges: list[tuple[int, int]], which: list[int]) -> list[bytes | None]:
    if blob is None:
        return [None] * len(ranges)
    size = blob.size()
    for i, (offset, length) in zip(which, ranges):
        if offset + length > size:
            raise BlobValueError(
                f"request {i}: range ({offset}, {length}) extends past the end of a blob of {size} bytes"
            )
    return list(blob.read_ranges(ranges))
