"""Storage: the one layer that touches file systems (local disk, memory, S3, any fsspec backend)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from lance_table.errors import InvalidURIError, StorageOptionsError
from lance_table.storage.base import Entry, StagedFile, Storage
from lance_table.storage.local import LocalStorage
from lance_table.storage.options import options_fingerprint, s3fs_arguments, with_connection_pool
from lance_table.storage.uris import local_path

__all__ = ["Entry", "LocalStorage", "StagedFile", "Storage", "clear_memory", "open_storage"]


def open_storage(
    uri: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    base_store_params: Mapping[str, Mapping[str, Any]] | None = None,
) -> Storage:
    """The storage for a dataset URI: a local path, ``file:``, ``memory://``, ``s3://``, ``az://``
    (``abfs://``, ``abfss://``), ``gs://`` or any fsspec URL.

    Local paths may be relative or start with ``~``; ``file:/abs``, ``file:///abs`` and
    ``file://localhost/abs`` (what Spark and Hadoop pass) all name the same directory.

    ``storage_options`` are passed to the filesystem. For S3 they take pylance's names
    (``aws_access_key_id``, ``aws_secret_access_key``, ``aws_endpoint``, ``aws_region``,
    ``timeout``, ``client_max_retries``, ... see :mod:`lance_table.storage.options`) and s3fs's own;
    for Azure pylance's ``azure_*`` names (:mod:`lance_table.storage.azure`), for GCS its
    ``google_*`` names (:mod:`lance_table.storage.gcs`); the environment variables pylance reads
    (``AWS_*``, ``AZURE_*``, ``GOOGLE_*``) are read too, and explicit options win over them.
    The storage's ``cache_key`` covers the options, so handles opened with other credentials or
    another endpoint never share cached readers.

    Options of other base paths of a multi-base dataset, as pylance takes them, are kept for those
    bases only: ``base_<id>.<name>`` entries of ``storage_options`` (not passed to this storage's
    filesystem) and ``base_store_params`` (options by base path URI).

    Raises:
        StorageOptionsError: an option is unknown, unsafe (``asynchronous``, ``loop``, a listing
            cache), refused (the message says why) or has a bad value.
        StorageCredentialsError: an Azure URI names no storage account.
        InvalidURIError: an Azure URI names no container.
        StorageOptionsError: also when ``base_store_params`` is not a dict of dicts by base path.
    """
    given = dict(storage_options or {})
    own = {k: v for k, v in given.items() if not (isinstance(k, str) and BASE_OPTION.match(k))}
    storage = _open(os.fspath(uri), own)
    storage.storage_options = given
    storage.base_store_params = _base_store_params(base_store_params)
    return storage


#: a ``storage_options`` entry meant for one base path only: ``base_<id>.<name>``
BASE_OPTION = re.compile(r"base_(\d+)\.(.+)\Z")


def _base_store_params(params: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """pylance's ``base_store_params``, checked: options (a dict) by base path URI (a string).

    Raises:
        StorageOptionsError: another shape.
    """
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise StorageOptionsError(
            "base_store_params",
            f"must be a dict of storage options by base path, not {type(params).__name__}",
        )
    out = {}
    for path, options in params.items():
        if not isinstance(path, str) or not isinstance(options, Mapping):
            raise StorageOptionsError(
                f"base_store_params[{path!r}]", "must map a base path URI (str) to a dict of storage options"
            )
        out[path] = dict(options)
    return out


def _open(text: str, options: dict[str, Any]) -> Storage:
    local = local_path(text)
    if local is not None:
        return LocalStorage(local)
    protocol, rest = text.split("://", 1)
    import fsspec

    from lance_table.storage.remote import FsspecStorage, MemoryStorage, S3Storage

    if protocol == "memory":
        return MemoryStorage(fsspec.filesystem("memory"), "/" + rest.strip("/"), text)
    if protocol in ("s3", "s3a"):
        try:
            import s3fs
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("s3:// datasets need s3fs: pip install 'lance_table[s3]'") from exc
        from lance_table.storage.arrow_s3 import READER_OPTION, open_arrow_s3, reader_choice
        from lance_table.storage.s3_direct import open_direct_s3

        bucket = rest.split("/", 1)[0]
        kwargs = s3fs_arguments(options, bucket, os.environ)
        fs = s3fs.S3FileSystem(**with_connection_pool(kwargs))
        arrow = open_arrow_s3(options, kwargs, os.environ)
        choice = reader_choice(options)
        direct = open_direct_s3(kwargs, bucket, os.environ) if choice == "direct" else None
        access = options_fingerprint({**kwargs, READER_OPTION: "pyarrow"} if arrow else kwargs)
        return S3Storage(fs, rest.strip("/"), text, access=access, arrow=arrow, direct=direct)
    if protocol in AZURE_SCHEMES:
        return _open_azure(text, rest, options)
    if protocol in ("gs", "gcs"):
        from lance_table.storage.gcs import open_gcs

        return open_gcs(text, rest, options)
    fs, path = fsspec.core.url_to_fs(text, **options)
    return FsspecStorage(fs, path, text, access=options_fingerprint(options))


#: URI schemes of Azure Blob Storage (``abfs[s]://container@account.dfs.core.windows.net/path`` too)
AZURE_SCHEMES = ("az", "abfs", "abfss", "adl", "azure")


def _open_azure(text: str, rest: str, options: dict[str, Any]) -> Storage:
    from lance_table.storage import azure
    from lance_table.storage.remote import AzureStorage

    authority, _, path = rest.partition("/")
    container, at, host = authority.partition("@")
    if at:  # the Hadoop form names the account in the host
        account, dot, domain = host.partition(".")
        if not dot or not domain.startswith(("dfs.", "blob.")):
            raise InvalidURIError(text, "names no storage account (container@account.dfs.core.windows.net)")
        options = {**options}
        given = {k.lower() for k in options}
        if not given & {"azure_storage_account_name", "account_name"}:
            options["azure_storage_account_name"] = account
        if "fabric" in domain and not given & {"azure_use_fabric_endpoint", "use_fabric_endpoint"}:
            options["azure_use_fabric_endpoint"] = "true"
    if not container:
        raise InvalidURIError(text, "names no container (az://container/path)")
    settings = azure.azure_settings(options, container)
    fs = azure.open_filesystem(settings)
    root = f"{container}/{path.strip('/')}".rstrip("/")
    return AzureStorage(fs, root, text, access=options_fingerprint(settings.fingerprint()))


def clear_memory(uri: str | None = None) -> int:
    """Free ``memory://`` datasets: the one at ``uri``, or every one when ``uri`` is None.

    ``memory://`` datasets live in fsspec's in-memory filesystem, one store shared by the whole
    process (every handle, thread and library using fsspec's ``memory`` protocol sees the same
    files) until the process exits. Returns the number of files removed.

    Raises:
        InvalidURIError: ``uri`` is not a ``memory://`` URI.
    """
    import fsspec

    fs = fsspec.filesystem("memory")
    if uri is None:
        root = "/"
    elif uri.startswith("memory://"):
        root = "/" + uri[len("memory://") :].strip("/")
    else:
        raise InvalidURIError(uri, "is not a memory:// URI")
    paths = [p for p in fs.find(root) if root == "/" or p == root or p.startswith(root + "/")]
    for path in paths:
        fs.rm_file(path)
    for directory in sorted(fs.pseudo_dirs, key=len, reverse=True):
        if directory and (root == "/" or directory == root or directory.startswith(root + "/")):
            fs.pseudo_dirs.remove(directory)
    return len(paths)
