"""Storage options for S3: pylance's names (and s3fs's own) checked and turned into s3fs arguments.

pylance takes the option names of its object store client (``aws_access_key_id``, ``aws_endpoint``,
``timeout``, ...), mostly with an ``aws_`` and a bare spelling. Every such name is known here and
either mapped to what s3fs and botocore do, accepted as having no meaning for s3fs (HTTP/2 and pool
tuning of pylance's own client), or refused with the reason. s3fs's own argument names that are
safe here are passed through; the ones that would break the storage layer (an event loop, a
listing cache) and every unknown name are refused with :class:`StorageOptionsError`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from lance_table.errors import StorageOptionsError
from lance_table.storage.arrow_s3 import READER_OPTION, check_reader

Handler = Callable[["_Builder", str, Any], None]


class _Builder:
    """The s3fs arguments being built from one set of options."""

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket
        self.kwargs: dict[str, Any] = {}
        self.client: dict[str, Any] = {}
        self.config: dict[str, Any] = {}
        self.s3_config: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}
        self.default_region: Any = None

    def result(self) -> dict[str, Any]:
        out = dict(self.kwargs)
        if self.default_region is not None and "region_name" not in self.client:
            self.client["region_name"] = self.default_region
        for name, mapped in (("client_kwargs", self.client), ("s3_additional_kwargs", self.extra)):
            if mapped:
                out[name] = {**(out.get(name) or {}), **mapped}
        config = dict(self.config)
        if self.s3_config:
            config["s3"] = {**(config.get("s3") or {}), **self.s3_config}
        if config:
            out["config_kwargs"] = {**(out.get("config_kwargs") or {}), **config}
        return out


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
# A humantime-like duration: "60s", "1m 30s", "500ms", "2 min"; a bare number is seconds.
_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0,
    "seconds": 1.0, "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
}  # fmt: skip
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zµ]*)")


def _bad(name: str, problem: str) -> StorageOptionsError:
    return StorageOptionsError(name, problem)


def apply_named_options(
    settings: Any,
    options: Mapping[str, Any],
    handlers: Mapping[str, Callable[[Any, str, Any], None]],
    *,
    store: str,
    known: Any,
    from_environment: Callable[[str], bool],
) -> None:
    """Hand each option to its handler (names case-insensitive), then each environment variable
    that ``from_environment`` takes and that names an option not given explicitly.

    Raises:
        StorageOptionsError: an unknown name, or one option given twice under two spellings.
    """
    given: dict[Callable[[Any, str, Any], None], str] = {}
    pending: list[tuple[Callable[[Any, str, Any], None], str, Any]] = []
    for raw, value in options.items():
        if not isinstance(raw, str):
            raise StorageOptionsError(repr(raw), "option names must be strings", known=known)
        handler = handlers.get(raw.lower())
        if handler is None:
            raise StorageOptionsError(raw, f"is not a known {store} storage option", known=known)
        if handler in given:
            raise StorageOptionsError(raw, f"is the same option as {given[handler]!r}, given twice")
        given[handler] = raw
        pending.append((handler, raw, value))
    for env, value in sorted(os.environ.items()):
        handler = handlers.get(env.lower())
        if handler is not None and handler not in given and from_environment(env):
            given[handler] = env
            pending.append((handler, env, value))
    for handler, name, value in pending:
        handler(settings, name, value)


def parse_bool(name: str, value: Any) -> bool:
    """An option's value as a boolean (``True``/``False`` or pylance's strings ``"true"``, ``"1"``, ...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _bad(name, f"must be true or false, not {value!r}")


def parse_duration(name: str, value: Any) -> float:
    """An option's value as seconds: a number of seconds, or ``"60s"``, ``"1m 30s"``, ``"500ms"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    text = str(value).strip().lower()
    total, pos = 0.0, 0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None or m.end() == pos or (m.group(2) and m.group(2) not in _UNITS):
            raise _bad(name, f"must be a duration such as '30s' or '1m 30s', not {value!r}")
        total += float(m.group(1)) * _UNITS[m.group(2) or "s"]
        pos = m.end()
    if not text:
        raise _bad(name, "must be a duration such as '30s', not empty")
    return total


def parse_count(name: str, value: Any) -> int:
    """An option's value as a non-negative whole number."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise _bad(name, f"must be a whole number, not {value!r}")
    return int(text)


# -- handlers: one per option, each writing into the builder ----------------------------------


def _to_kwarg(key: str, convert: Callable[[str, Any], Any] | None = None) -> Handler:
    def handle(b: _Builder, name: str, value: Any) -> None:
        b.kwargs[key] = convert(name, value) if convert else value

    return handle


def _to_client(key: str) -> Handler:
    def handle(b: _Builder, name: str, value: Any) -> None:
        b.client[key] = value

    return handle


def _to_config(key: str, convert: Callable[[str, Any], Any]) -> Handler:
    def handle(b: _Builder, name: str, value: Any) -> None:
        b.config[key] = convert(name, value)

    return handle


def _to_extra(key: str, convert: Callable[[str, Any], Any] | None = None) -> Handler:
    def handle(b: _Builder, name: str, value: Any) -> None:
        b.extra[key] = convert(name, value) if convert else value

    return handle


def _default_region(b: _Builder, name: str, value: Any) -> None:
    b.default_region = value


def _virtual_hosted(b: _Builder, name: str, value: Any) -> None:
    b.s3_config["addressing_style"] = "virtual" if parse_bool(name, value) else "path"


def _unsigned_payload(b: _Builder, name: str, value: Any) -> None:
    b.s3_config["payload_signing_enabled"] = not parse_bool(name, value)


def _invalid_certificates(b: _Builder, name: str, value: Any) -> None:
    if parse_bool(name, value):
        b.client["verify"] = False


def _max_retries(b: _Builder, name: str, value: Any) -> None:
    b.config["retries"] = {"total_max_attempts": parse_count(name, value) + 1, "mode": "standard"}


def _proxy(b: _Builder, name: str, value: Any) -> None:
    b.config["proxies"] = {"http": str(value), "https": str(value)}


_CHECKSUMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256")


def _checksum(b: _Builder, name: str, value: Any) -> None:
    algorithm = str(value).strip().upper()
    if algorithm not in _CHECKSUMS:
        raise _bad(name, f"must be one of {', '.join(_CHECKSUMS)}, not {value!r}")
    b.extra["ChecksumAlgorithm"] = algorithm


def _encryption(b: _Builder, name: str, value: Any) -> None:
    if value == "sse-c":  # the customer key option sets SSE-C's own headers
        return
    if value not in ("AES256", "aws:kms", "aws:kms:dsse"):
        raise _bad(name, f"must be 'AES256', 'aws:kms', 'aws:kms:dsse' or 'sse-c', not {value!r}")
    b.extra["ServerSideEncryption"] = value


def _customer_key(b: _Builder, name: str, value: Any) -> None:
    try:
        key = base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise _bad(name, "must be a base64-encoded key") from None  # the value is a secret: not shown
    b.extra["SSECustomerAlgorithm"] = "AES256"
    b.extra["SSECustomerKey"] = key


def _bucket(b: _Builder, name: str, value: Any) -> None:
    if str(value) != b.bucket:
        raise _bad(name, f"names bucket {value!r}, but the URI's bucket is {b.bucket!r}")


def _conditional_put(b: _Builder, name: str, value: Any) -> None:
    if str(value).strip().lower() != "etag":
        raise _bad(name, "only 'etag' is supported: lance_table commits with If-None-Match")


def _checked(convert: Callable[[str, Any], Any]) -> Handler:
    """An option that has no meaning for s3fs: its value is checked, then it has no effect."""

    def handle(b: _Builder, name: str, value: Any) -> None:
        convert(name, value)

    return handle


def _ignored(b: _Builder, name: str, value: Any) -> None:
    """An option that has no meaning for s3fs (tuning of pylance's own HTTP client)."""


def _refused(reason: str) -> Handler:
    def handle(b: _Builder, name: str, value: Any) -> None:
        raise _bad(name, f"is not supported: {reason}")

    _REFUSED.add(handle)
    return handle


_REFUSED: set[Handler] = set()


def _no_listing_cache(b: _Builder, name: str, value: Any) -> None:
    if parse_bool(name, value):
        raise _bad(name, f"cannot be true: {_LISTING_CACHE}")
    b.kwargs["use_listings_cache"] = False


def _with_aws(*names: str) -> tuple[str, ...]:
    """Client options: object_store also takes each with an ``aws_`` prefix."""
    return names + tuple(f"aws_{n}" for n in names)


_CREDENTIAL_DISCOVERY = (
    "s3fs (botocore) finds credentials through its own chain: set the matching AWS_* environment "
    "variable instead, or pass aws_access_key_id / aws_secret_access_key"
)
_NO_S3FS_EQUIVALENT = "has no equivalent in s3fs; set it for botocore through the environment instead"
_LISTING_CACHE = "a listing cache would hide files that other writers add later"
_EVENT_LOOP = "lance_table calls s3fs's blocking API from threads: s3fs must own its event loop and session"

# pylance's names (object_store's S3 and client keys, and lance's own), each spelling -> handler.
_PYLANCE: dict[tuple[str, ...], Handler] = {
    ("aws_access_key_id", "access_key_id"): _to_kwarg("key"),
    ("aws_secret_access_key", "secret_access_key"): _to_kwarg("secret"),
    ("aws_session_token", "aws_token", "session_token", "token"): _to_kwarg("token"),
    ("aws_region", "region"): _to_client("region_name"),
    ("aws_default_region", "default_region"): _default_region,
    ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url"): _to_kwarg("endpoint_url"),
    ("aws_bucket", "aws_bucket_name", "bucket", "bucket_name"): _bucket,
    ("aws_virtual_hosted_style_request", "virtual_hosted_style_request"): _virtual_hosted,
    ("aws_skip_signature", "skip_signature"): _to_kwarg("anon", parse_bool),
    ("aws_unsigned_payload", "unsigned_payload"): _unsigned_payload,
    ("aws_checksum_algorithm", "checksum_algorithm"): _checksum,
    ("aws_request_payer", "request_payer"): _to_kwarg("requester_pays", parse_bool),
    ("aws_server_side_encryption",): _encryption,
    ("aws_sse_kms_key_id",): _to_extra("SSEKMSKeyId"),
    ("aws_sse_bucket_key_enabled",): _to_extra("BucketKeyEnabled", parse_bool),
    ("aws_sse_customer_key_base64",): _customer_key,
    ("aws_conditional_put", "conditional_put"): _conditional_put,
    # lance_table never tags objects, never commits by copy, and botocore finds S3 Express buckets
    # by their names: these have nothing to change.
    ("aws_disable_tagging", "disable_tagging"): _checked(parse_bool),
    ("aws_copy_if_not_exists", "copy_if_not_exists"): _ignored,
    ("aws_s3_express", "s3_express"): _checked(parse_bool),
    ("aws_imdsv1_fallback", "imdsv1_fallback"): _refused(_CREDENTIAL_DISCOVERY),
    ("aws_metadata_endpoint", "metadata_endpoint"): _refused(_CREDENTIAL_DISCOVERY),
    ("aws_container_credentials_relative_uri",): _refused(_CREDENTIAL_DISCOVERY),
    ("aws_container_credentials_full_uri",): _refused(_CREDENTIAL_DISCOVERY),
    ("aws_container_authorization_token_file",): _refused(_CREDENTIAL_DISCOVERY),
    ("aws_web_identity_token_file", "web_identity_token_file"): _refused(_CREDENTIAL_DISCOVERY),
    ("aws_role_arn", "role_arn"): _refused(_CREDENTIAL_DISCOVERY),
    ("aws_role_session_name", "role_session_name"): _refused(_CREDENTIAL_DISCOVERY),
    _with_aws("allow_http"): _checked(parse_bool),  # s3fs follows the endpoint's own scheme
    _with_aws("allow_invalid_certificates"): _invalid_certificates,
    _with_aws("connect_timeout"): _to_config("connect_timeout", parse_duration),
    _with_aws("timeout", "request_timeout", "read_timeout"): _to_config("read_timeout", parse_duration),
    _with_aws("user_agent"): _to_config("user_agent", lambda n, v: str(v)),
    _with_aws("proxy_url"): _proxy,
    _with_aws("default_content_type"): _to_extra("ContentType", lambda n, v: str(v)),
    _with_aws("proxy_ca_certificate"): _refused(_NO_S3FS_EQUIVALENT + " (AWS_CA_BUNDLE)"),
    _with_aws("proxy_excludes"): _refused(_NO_S3FS_EQUIVALENT + " (NO_PROXY)"),
    _with_aws("http1_only", "http2_only", "http2_keep_alive_while_idle", "randomize_addresses"): _checked(
        parse_bool
    ),
    _with_aws("http2_keep_alive_interval", "http2_keep_alive_timeout", "pool_idle_timeout"): _checked(
        parse_duration
    ),
    _with_aws("http2_max_frame_size", "pool_max_idle_per_host"): _checked(parse_count),
    ("client_max_retries",): _max_retries,
    ("client_retry_timeout",): _checked(parse_duration),
    ("download_retry_count",): _checked(parse_count),
}

# s3fs's own argument names, as the storage layer has always passed them through.
_PASSED_THROUGH = (
    "key", "secret", "username", "password", "anon", "use_ssl", "requester_pays", "profile",
    "default_block_size", "default_fill_cache", "default_cache_type", "cache_regions",
    "max_concurrency", "fixed_upload_size", "skip_instance_cache",
    "client_kwargs", "config_kwargs", "s3_additional_kwargs",
)  # fmt: skip
_UNSAFE = ("asynchronous", "loop", "session", "listings_expiry_time", "max_paths")
_S3FS: dict[str, Handler] = {
    **{name: _to_kwarg(name) for name in _PASSED_THROUGH},
    "region_name": _to_client("region_name"),
    "use_listings_cache": _no_listing_cache,
    "listings_expiry_time": _refused(_LISTING_CACHE),
    "max_paths": _refused(_LISTING_CACHE),
    # lance_table's own: which client reads data files' byte ranges (see arrow_s3); not for s3fs
    READER_OPTION: _checked(check_reader),
    "asynchronous": _refused(_EVENT_LOOP),
    "loop": _refused(_EVENT_LOOP),
    "session": _refused(_EVENT_LOOP),
}

_HANDLERS: dict[str, Handler] = {**{n: h for names, h in _PYLANCE.items() for n in names}, **_S3FS}
_DICT_OPTIONS = ("client_kwargs", "config_kwargs", "s3_additional_kwargs")

#: every storage option name accepted for S3 (pylance's spellings, then s3fs's own)
KNOWN_S3_OPTIONS: tuple[str, ...] = tuple(sorted({n for names in _PYLANCE for n in names})) + tuple(
    sorted(n for n in _S3FS if n not in _UNSAFE)
)


#: ``AWS_*`` variables botocore reads itself (taking them as options too would, for one, override
#: the ``profile`` option's credentials, which botocore puts before the environment's)
_ENV_READ_BY_BOTOCORE = (
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_default_region",
    "aws_endpoint_url",
)  # fmt: skip
_ENV_OVERRIDDEN_BY_URI = ("aws_bucket", "aws_bucket_name")
_ENV_LEFT_ALONE = frozenset(_ENV_READ_BY_BOTOCORE + _ENV_OVERRIDDEN_BY_URI)


def environment_options(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``AWS_*`` environment variables pylance reads as options that botocore does not read.

    pylance's client takes every ``AWS_*`` variable that names one of its options (``AWS_REGION``,
    ``AWS_ENDPOINT``, ``AWS_ALLOW_HTTP``, ``AWS_SKIP_SIGNATURE``, ``AWS_SERVER_SIDE_ENCRYPTION``,
    ...); variables for credential discovery are left to botocore, which has its own.
    """
    out = {}
    for env, value in environ.items():
        name = env.lower()
        handler = _HANDLERS.get(name)
        if env.startswith("AWS_") and handler not in (None, *_REFUSED) and name not in _ENV_LEFT_ALONE:
            out[env] = value
    return out


def s3fs_arguments(
    options: Mapping[str, Any], bucket: str, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``s3fs.S3FileSystem`` arguments for pylance-style (or s3fs) storage options.

    Names are case-insensitive. Values may be strings, as pylance takes them (``"true"``, ``"60s"``).
    ``environ`` (the process environment, for :func:`lance_table.storage.open_storage`) adds the
    options its ``AWS_*`` variables name (see :func:`environment_options`) where ``options`` do not
    set the same option.

    Raises:
        StorageOptionsError: an unknown name, a name that would break the storage layer (an event
            loop, a listing cache), a name given twice under two spellings, or a bad value.
    """
    builder = _Builder(bucket)
    seen: dict[Handler, str] = {}
    for raw_name, value in options.items():
        if not isinstance(raw_name, str):
            raise StorageOptionsError(repr(raw_name), "option names must be strings", known=KNOWN_S3_OPTIONS)
        name = raw_name.lower()
        handler = _HANDLERS.get(name)
        if handler is None:
            raise StorageOptionsError(raw_name, "is not a known S3 storage option", known=KNOWN_S3_OPTIONS)
        if handler in seen:
            raise StorageOptionsError(raw_name, f"is the same option as {seen[handler]!r}, given twice")
        seen[handler] = raw_name
        if name in _DICT_OPTIONS and value is not None and not isinstance(value, Mapping):
            raise StorageOptionsError(raw_name, "must be a dict of keyword arguments")
        handler(builder, raw_name, value)
    for env, value in sorted(environment_options(environ or {}).items()):
        handler = _HANDLERS[env.lower()]
        if handler not in seen:
            seen[handler] = env
            handler(builder, env, value)
    kwargs = builder.result()
    kwargs["use_listings_cache"] = False  # see _LISTING_CACHE
    return kwargs


#: the connections an S3 client keeps at least (botocore's default, 10, would queue the requests of
#: a scan of many small files behind each other)
S3_POOL_CONNECTIONS = 64


def with_connection_pool(kwargs: Mapping[str, Any], connections: int = S3_POOL_CONNECTIONS) -> dict[str, Any]:
    """``kwargs`` (s3fs arguments) with a connection pool of ``connections``, unless the caller set one."""
    config = dict(kwargs.get("config_kwargs") or {})
    config.setdefault("max_pool_connections", connections)
    return {**kwargs, "config_kwargs": config}


def options_fingerprint(kwargs: Mapping[str, Any]) -> str:
    """A digest of normalized filesystem arguments: equal for equal access, and no secret in it."""
    text = json.dumps(kwargs, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
