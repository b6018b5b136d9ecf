"""Files in a manifest's other base paths (pylance's multi-base datasets and shallow clones): a
data or deletion file whose ``base_id`` names a registered base is read from that base, with the
storage options of the dataset. A base that is a dataset root keeps data files under ``data/``;
other bases hold them directly."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from lance_table.errors import UnsupportedFormatError
from lance_table.format import paths
from lance_table.format.bases import BasePath
from lance_table.storage import Storage, open_storage

_LOCK = threading.Lock()
_OPENED: dict[tuple[str, str], Storage] = {}


def base_storage(storage: Storage, bases: Mapping[int, BasePath], base_id: int, what: str) -> Storage:
    """The storage of base ``base_id`` (opened once per dataset storage and base).

    Raises:
        UnsupportedFormatError: the manifest registers no such base.
    """
    base = bases.get(base_id)
    if base is None:
        raise UnsupportedFormatError(
            f"{what} lives in base path {base_id}, which the manifest does not register"
        )
    key = (storage.cache_key, base.path)
    with _LOCK:
        found = _OPENED.get(key)
    if found is None:
        found = open_storage(base.path, storage.storage_options)
        with _LOCK:
            if len(_OPENED) > 256:
                _OPENED.clear()
            found = _OPENED.setdefault(key, found)
    return found


def data_dir(bases: Mapping[int, BasePath], base_id: int | None) -> str:
    """The directory data files of a base sit in, relative to the base (``data`` for the dataset's own)."""
    if base_id is None:
        return paths.DATA_DIR
    base = bases.get(base_id)
    return paths.DATA_DIR if base is None or base.is_dataset_root else ""
