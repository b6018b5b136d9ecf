"""Scans as pandas DataFrames, as pylance's ``to_pandas`` gives them.

pylance's ``to_pandas`` takes the scan's options and ``blob_mode``, which says how blob columns
come out ("lazy": ``BlobFile`` objects, "bytes": their bytes, "descriptions": the descriptors
``to_table`` gives); every other keyword goes to ``pyarrow.Table.to_pandas``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lance_table.errors import UnsupportedOptionError
from lance_table.file.fields import BLOB_KEY
from lance_table.table.blob_write import is_blob_v2_arrow

DEFAULT_BLOB_MODE = "lazy"
BLOB_MODES = ("lazy", "bytes", "descriptions")


def _is_blob(field: pa.Field) -> bool:
    return is_blob_v2_arrow(field) or BLOB_KEY.encode() in (field.metadata or {})


def to_pandas(
    schema: pa.Schema, read: Callable[[], pa.Table], blob_mode: str = DEFAULT_BLOB_MODE, **kwargs: Any
) -> Any:
    """The rows ``read()`` gives (of ``schema``, the scan's projection) as a DataFrame; ``kwargs``
    go to ``pyarrow.Table.to_pandas``.

    Raises:
        ValueError: ``blob_mode`` is not one of :data:`BLOB_MODES`.
        UnsupportedOptionError: blob columns are projected with ``blob_mode`` "lazy" or "bytes"
            (read them with ``take_blobs``, or ask for "descriptions").
    """
    if blob_mode not in BLOB_MODES:
        raise ValueError(f"blob_mode must be one of {', '.join(BLOB_MODES)}, got {blob_mode!r}")
    blobs = [f.name for f in schema if _is_blob(f)]
    if blobs and blob_mode != "descriptions":
        raise UnsupportedOptionError(
            "to_pandas",
            "blob_mode",
            f"{blob_mode!r} for blob column(s) {', '.join(blobs)}; use blob_mode='descriptions', "
            "or take_blobs() for the blobs themselves",
        )
    return read().to_pandas(**kwargs)
