"""Storage: the one layer that touches file systems (local disk, memory, S3, any fsspec backend)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lance_table.storage.base import Entry, Storage
from lance_table.storage.local import LocalStorage

__all__ = ["Entry", "LocalStorage", "Storage", "open_storage"]


def _s3_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """Translate pylance-style storage options into s3fs arguments."""
    opts = dict(options)
    kwargs: dict[str, Any] = {}
    client: dict[str, Any] = dict(opts.pop("client_kwargs", {}) or {})
    aliases = {
        "aws_access_key_id": "key",
        "access_key_id": "key",
        "aws_secret_access_key": "secret",
        "secret_access_key": "secret",
        "aws_session_token": "token",
        "session_token": "token",
    }
    for name, value in opts.items():
        lname = name.lower()
        if lname in aliases:
            kwargs[aliases[lname]] = value
        elif lname in ("aws_endpoint", "endpoint", "endpoint_url", "aws_endpoint_url"):
            client["endpoint_url"] = value
        elif lname in ("aws_region", "region", "region_name"):
            client["region_name"] = value
        elif lname in ("allow_http", "aws_allow_http", "virtual_hosted_style_request"):
            continue
        else:
            kwargs[name] = value
    if client:
        kwargs["client_kwargs"] = client
    return kwargs


def open_storage(uri: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> Storage:
    """The storage for a dataset URI: a local path, ``file://``, ``memory://``, ``s3://`` or any fsspec URL.

    ``storage_options`` are passed to the filesystem; for S3 the pylance names (``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_endpoint``, ``aws_region``, ...) and s3fs names both work.
    """
    text = os.fspath(uri)
    options = dict(storage_options or {})
    if "://" not in text:
        return LocalStorage(text)
    protocol, rest = text.split("://", 1)
    if protocol == "file":
        return LocalStorage(rest)
    import fsspec

    from lance_table.storage.remote import FsspecStorage, MemoryStorage, S3Storage

    if protocol == "memory":
        return MemoryStorage(fsspec.filesystem("memory"), "/" + rest.strip("/"), text)
    if protocol in ("s3", "s3a"):
        try:
            import s3fs
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("s3:// datasets need s3fs: pip install 'lance_table[s3]'") from exc
        # No listing cache: it would outlive the listing and hide files other writers add later.
        fs = s3fs.S3FileSystem(**{"use_listings_cache": False, **_s3_kwargs(options)})
        return S3Storage(fs, rest.strip("/"), text)
    fs, path = fsspec.core.url_to_fs(text, **options)
    return FsspecStorage(fs, path, text)
