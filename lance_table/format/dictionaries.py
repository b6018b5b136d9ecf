"""Dictionary values of legacy (0.1) datasets, which only ever grow: every data file's keys index
a prefix of the values the manifest holds."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa


def is_prefix(short: pa.Array, long: pa.Array) -> bool:
    """Whether ``long`` starts with the values of ``short``."""
    return len(short) <= len(long) and long.slice(0, len(short)).equals(short)


def extended(current: Mapping[int, pa.Array], written: Mapping[int, pa.Array]) -> dict[int, pa.Array] | None:
    """Per field id the longer of the two values, when the other is a prefix of it; None when a
    field's values disagree (keys written against one mean other values in the other)."""
    out = dict(current)
    for fid, values in written.items():
        have = out.get(fid)
        if have is None or is_prefix(have, values):
            out[fid] = values
        elif not is_prefix(values, have):
            return None
    return out
