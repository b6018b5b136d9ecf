"""Range reads of S3 data files through pyarrow's own S3 client (opt-in).

The storage option ``lance_table_s3_reader`` chooses the client of the byte-range reads of data
files on ``s3://``: ``"direct"`` (the default: plain signed GETs, see :mod:`.s3_direct`),
``"s3fs"`` or ``"pyarrow"``. With pyarrow, listings, commits, manifests and every other request
go through s3fs. pyarrow's client (``pyarrow.fs.S3FileSystem``, C++,
the GIL released while it waits) spends about a third of the CPU time per request that s3fs and
botocore spend, which matters for scans of many small files on a busy or small machine; but
pyarrow's Python API opens a file with a HEAD request for its size (there is no way to hand it
the size the manifest records), so every data file read this way costs one HEAD more, once per
open reader. Measured on the slowed moto server of ``benchmarks/bench_s3.py``: see that script.

The s3fs arguments (see :func:`lance_table.storage.options.s3fs_arguments`) are mapped onto
pyarrow's: credentials and session token, anonymous access, endpoint (scheme and host), region,
path-style or virtual-hosted addressing, timeouts and retries. When one of them has no pyarrow
equivalent (a customer-provided encryption key, requester pays, a botocore profile, disabled
certificate checks, a proxy, ...), reads stay on s3fs. A forked child (Spark's Python workers)
reads through s3fs too: pyarrow's S3 client is not safe to use after a fork.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from lance_table.errors import StorageOptionsError

#: the storage option that chooses the client of data-file range reads on S3
READER_OPTION = "lance_table_s3_reader"
#: its values: plain signed GETs (the default, see :mod:`.s3_direct`; s3fs where the options do
#: not allow them), s3fs, or pyarrow's own S3 client
READER_CHOICES = ("direct", "s3fs", "pyarrow")

# s3fs arguments that do not change how a GET of a byte range is sent
_IGNORED = frozenset(
    (
        "use_listings_cache", "default_block_size", "default_fill_cache", "default_cache_type",
        "cache_regions", "max_concurrency", "fixed_upload_size", "skip_instance_cache",
    )
)  # fmt: skip
# extra request arguments that only uploads send (a GET sends none of them)
_UPLOAD_ONLY = frozenset(
    ("ServerSideEncryption", "SSEKMSKeyId", "BucketKeyEnabled", "ContentType", "ChecksumAlgorithm")
)
_CONFIG_IGNORED = frozenset(("max_pool_connections", "user_agent"))


def reader_choice(options: Mapping[str, Any]) -> str:
    """The value of :data:`READER_OPTION` in ``options`` (names case-insensitive), else ``"direct"``.

    Raises:
        StorageOptionsError: the value is not one of :data:`READER_CHOICES`.
    """
    for name, value in options.items():
        if isinstance(name, str) and name.lower() == READER_OPTION:
            return check_reader(name, value)
    return "direct"


def check_reader(name: str, value: Any) -> str:
    """``value`` of :data:`READER_OPTION`, checked.

    Raises:
        StorageOptionsError: the value is not one of :data:`READER_CHOICES`.
    """
    text = str(value).strip().lower()
    if text not in READER_CHOICES:
        raise StorageOptionsError(name, f"must be one of {', '.join(READER_CHOICES)}, not {value!r}")
    return text


def arrow_arguments(kwargs: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """``pyarrow.fs.S3FileSystem`` arguments that read as the s3fs arguments ``kwargs`` do, or
    None when one of them has no pyarrow equivalent."""
    out: dict[str, Any] = {"check_directory_existence_before_creation": False}
    endpoint: str | None = None
    region: str | None = None
    for name, value in kwargs.items():
        if name in _IGNORED:
            continue
        if name in ("key", "username"):
            out["access_key"] = value
        elif name in ("secret", "password"):
            out["secret_key"] = value
        elif name == "token":
            out["session_token"] = value
        elif name == "anon":
            out["anonymous"] = bool(value)
        elif name == "endpoint_url":
            endpoint = value
        elif name == "client_kwargs":
            for key, inner in (value or {}).items():
                if key == "endpoint_url":
                    endpoint = inner
                elif key == "region_name":
                    region = inner
                else:
                    return None
        elif name == "config_kwargs":
            if not _config(value or {}, out):
                return None
        elif name == "s3_additional_kwargs":
            if any(key not in _UPLOAD_ONLY for key in (value or {})):
                return None
        else:
            return None
    if ("access_key" in out) != ("secret_key" in out):
        return None
    if endpoint:
        parts = urlsplit(str(endpoint))
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip("/"):
            return None
        out["endpoint_override"] = parts.netloc
        out["scheme"] = parts.scheme
    elif out.pop("_path_style", False):
        return None  # pyarrow addresses AWS's own endpoints by virtual host only
    out.pop("_path_style", None)
    region = region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        out["region"] = region
    elif endpoint:
        out["region"] = "us-east-1"  # as botocore signs for an endpoint of unknown region
    else:
        return None  # s3fs follows a bucket's region redirects; pyarrow would need a request
    return out


def _config(config: Mapping[str, Any], out: dict[str, Any]) -> bool:
    """Map botocore ``Config`` arguments into ``out``; False when one cannot be."""
    import pyarrow.fs as pafs

    for key, value in config.items():
        if key in _CONFIG_IGNORED:
            continue
        if key == "connect_timeout":
            out["connect_timeout"] = float(value)
        elif key == "read_timeout":
            out["request_timeout"] = float(value)
        elif key == "retries" and set(value) <= {"total_max_attempts", "mode"}:
            attempts = int(value.get("total_max_attempts", 3))
            out["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=attempts)
        elif key == "s3" and set(value) <= {"addressing_style", "payload_signing_enabled"}:
            style = value.get("addressing_style")
            if style == "virtual":
                out["force_virtual_addressing"] = True
            elif style == "path":
                out["_path_style"] = True
        else:
            return False
    return True


class ArrowS3:
    """pyarrow's S3 filesystem for one storage, made in the process that opened the storage."""

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        import pyarrow.fs as pafs

        self.fs = pafs.S3FileSystem(**arguments)
        self.pid = os.getpid()

    def usable(self) -> bool:
        """False in a forked child: pyarrow's S3 client must not be used after a fork."""
        return self.pid == os.getpid()


def open_arrow_s3(
    options: Mapping[str, Any], kwargs: Mapping[str, Any], environ: Mapping[str, str]
) -> ArrowS3 | None:
    """pyarrow's S3 filesystem for data-file reads, if the options ask for it and map onto it."""
    if reader_choice(options) != "pyarrow":
        return None
    arguments = arrow_arguments(kwargs, environ)
    return None if arguments is None else ArrowS3(arguments)


class ArrowFile:
    """One S3 object opened with pyarrow (a HEAD request), read by byte ranges from any thread."""

    def __init__(self, arrow: ArrowS3, path: str, name: str) -> None:
        self._arrow = arrow
        self._path = path
        self._name = name
        self._handle: Any = None
        self._lock = threading.Lock()

    def size(self) -> int:
        """The object's size, as its HEAD answered."""
        return int(self._open().size())

    def _open(self) -> Any:
        handle = self._handle
        if handle is None:
            with self._lock:
                if self._handle is None:
                    self._handle = _typed(self._name, lambda: self._arrow.fs.open_input_file(self._path))
                handle = self._handle
        return handle

    def read_at(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer at the object's end)."""
        handle = self._open()
        return bytes(_typed(self._name, lambda: handle.read_at(length, offset)))


def _typed(name: str, call: Any) -> Any:
    """``call()``, its failures as the builtin errors the storage layer types: a missing object
    is FileNotFoundError, a refusal PermissionError, an unreachable store ConnectionError."""
    try:
        return call()
    except FileNotFoundError as exc:
        raise FileNotFoundError(errno.ENOENT, "no such object", name) from exc
    except OSError as exc:
        text = str(exc)
        if "ACCESS_DENIED" in text or "UNAUTHORIZED" in text or "FORBIDDEN" in text.upper():
            raise PermissionError(errno.EACCES, f"access denied ({text})", name) from exc
        if "NETWORK_CONNECTION" in text or "Couldn't connect" in text:
            raise ConnectionError(errno.ECONNREFUSED, f"unreachable ({text})", name) from exc
        if "NO_SUCH_KEY" in text or "RESOURCE_NOT_FOUND" in text:
            raise FileNotFoundError(errno.ENOENT, "no such object", name) from exc
        raise
