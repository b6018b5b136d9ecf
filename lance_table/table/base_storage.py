"""Files in a manifest's other base paths (pylance's multi-base datasets and shallow clones): a
data or deletion file whose ``base_id`` names a registered base is read from that base. A base that
is a dataset root keeps data files under ``data/``; other bases hold them directly.

A base is opened with its own storage options as pylance decides them: the ``base_store_params``
entry of its exact path when there is one (those options alone); else the dataset's storage
options, with its ``base_<id>.<name>`` entries over them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lance_table._lru import LRU
from lance_table.errors import UnsupportedFormatError
from lance_table.format import paths
from lance_table.format.bases import BasePath
from lance_table.storage import BASE_OPTION, Storage, open_storage

# storages of base paths, by the dataset storage's key, the base path and the options it is
# opened with (a storage keeps no metadata of files: see Storage.cache_key)
_OPENED: LRU[tuple[str, str, str], Storage] = LRU(256)


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
    options = base_options(storage, base_id, base.path)
    key = (storage.cache_key, base.path, repr(sorted(options.items())))
    found = _OPENED.get(key)
    if found is None:
        found = _OPENED.setdefault(key, open_storage(base.path, options))
    return found


def base_options(storage: Storage, base_id: int, path: str) -> dict[str, Any]:
    """The storage options base ``base_id`` at ``path`` is opened with (see the module)."""
    given = storage.base_store_params.get(path)
    if given is not None:
        return dict(given)
    own: dict[str, Any] = {}
    mine: dict[str, Any] = {}
    for key, value in storage.storage_options.items():
        found = BASE_OPTION.match(key) if isinstance(key, str) else None
        if found is None:
            own[key] = value
        elif int(found.group(1)) == base_id:
            mine[found.group(2)] = value
    return {**own, **mine}


def data_dir(bases: Mapping[int, BasePath], base_id: int | None) -> str:
    """The directory data files of a base sit in, relative to the base (``data`` for the dataset's own)."""
    if base_id is None:
        return paths.DATA_DIR
    base = bases.get(base_id)
    return paths.DATA_DIR if base is None or base.is_dataset_root else ""
