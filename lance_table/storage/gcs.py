"""Google Cloud Storage: pylance's ``google_*`` storage options turned into a gcsfs filesystem.

pylance takes its object store client's names (``google_service_account``,
``google_service_account_key``, ``google_application_credentials``, ``google_bucket``,
``google_skip_signature``, each with its aliases), its client options (``timeout``,
``connect_timeout``, ``client_max_retries``, ...) and the ``GOOGLE_*`` environment variables of the
same names. A service account file or key with ``"gcs_base_url"`` and ``"disable_oauth": true`` (how
pylance is pointed at a GCS emulator) sets the endpoint and anonymous access. gcsfs's own argument
names are taken too. Commits create the manifest with ``ifGenerationMatch=0``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_table.errors import StorageOptionsError
from lance_table.storage.base import Storage
from lance_table.storage.options import options_fingerprint, parse_bool, parse_count, parse_duration

#: attempts gcsfs makes for a failing request unless ``client_max_retries`` says otherwise
DEFAULT_ATTEMPTS = 6


@dataclass
class GCSSettings:
    """What one set of GCS options asks for: gcsfs keyword arguments and client settings."""

    bucket: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    attempts: int = DEFAULT_ATTEMPTS
    connect_timeout: float | None = None
    timeout: float | None = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[GCSSettings, str, Any], None]


def _bad(name: str, problem: str) -> StorageOptionsError:
    return StorageOptionsError(name, problem)


def _service_account(info: dict[str, Any], s: GCSSettings, fallback: Any) -> None:
    """A service account as pylance reads it: an emulator's ``gcs_base_url``/``disable_oauth`` too."""
    if info.get("gcs_base_url"):
        s.kwargs["endpoint_url"] = str(info["gcs_base_url"]).rstrip("/")
    s.kwargs["token"] = "anon" if info.get("disable_oauth") else fallback


def _account_file(s: GCSSettings, name: str, value: Any) -> None:
    path = os.path.expanduser(str(value))
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError) as exc:
        raise _bad(name, f"must name a readable service account JSON file: {exc}") from None
    _service_account(info if isinstance(info, dict) else {}, s, path)


def _account_key(s: GCSSettings, name: str, value: Any) -> None:
    try:
        info = json.loads(str(value)) if not isinstance(value, Mapping) else dict(value)
    except ValueError:
        raise _bad(name, "must be a service account key in JSON") from None  # a secret: not shown
    if not isinstance(info, dict):
        raise _bad(name, "must be a service account key in JSON (an object)")
    _service_account(info, s, info)


def _credentials_file(s: GCSSettings, name: str, value: Any) -> None:
    s.kwargs["token"] = os.path.expanduser(str(value))


def _skip_signature(s: GCSSettings, name: str, value: Any) -> None:
    if parse_bool(name, value):
        s.kwargs["token"] = "anon"


def _bucket(s: GCSSettings, name: str, value: Any) -> None:
    if str(value) != s.bucket:
        raise _bad(name, f"names bucket {value!r}, but the URI's bucket is {s.bucket!r}")


def _attempts(s: GCSSettings, name: str, value: Any) -> None:
    s.attempts = parse_count(name, value) + 1


def _timeout(attr: str) -> Handler:
    def handle(s: GCSSettings, name: str, value: Any) -> None:
        setattr(s, attr, parse_duration(name, value))

    return handle


def _user_agent(s: GCSSettings, name: str, value: Any) -> None:
    s.headers["User-Agent"] = str(value)


def _proxy(s: GCSSettings, name: str, value: Any) -> None:
    s.kwargs.setdefault("session_kwargs", {})["proxy"] = str(value)


def _kwarg(key: str) -> Handler:
    def handle(s: GCSSettings, name: str, value: Any) -> None:
        s.kwargs[key] = value

    return handle


def _checked(convert: Callable[[str, Any], Any]) -> Handler:
    """An option without meaning for gcsfs: its value is checked, nothing else."""

    def handle(s: GCSSettings, name: str, value: Any) -> None:
        convert(name, value)

    return handle


def _refused(reason: str) -> Handler:
    def handle(s: GCSSettings, name: str, value: Any) -> None:
        raise _bad(name, f"is not supported: {reason}")

    return handle


def _with(*names: str) -> tuple[str, ...]:
    return names + tuple(f"google_{n}" for n in names)


_LISTING_CACHE = "a listing cache would hide files that other writers add later"
_EVENT_LOOP = "lance_table calls gcsfs's blocking API from threads: gcsfs must own its event loop"

_PYLANCE: dict[tuple[str, ...], Handler] = {
    (
        "google_service_account", "service_account", "google_service_account_path",
        "service_account_path",
    ): _account_file,
    ("google_service_account_key", "service_account_key"): _account_key,
    ("google_application_credentials", "application_credentials"): _credentials_file,
    ("google_bucket", "google_bucket_name", "bucket", "bucket_name"): _bucket,
    ("google_skip_signature", "skip_signature"): _skip_signature,
    _with("allow_http"): _checked(parse_bool),  # gcsfs follows the endpoint's own scheme
    _with("allow_invalid_certificates"): _refused(
        "gcsfs always verifies certificates; add the certificate to the system's trust store"
    ),
    _with("connect_timeout"): _timeout("connect_timeout"),
    _with("timeout", "request_timeout", "read_timeout"): _timeout("timeout"),
    _with("user_agent"): _user_agent,
    _with("proxy_url"): _proxy,
    _with("proxy_ca_certificate"): _refused("aiohttp takes the proxy's CA from the system's trust store"),
    _with("proxy_excludes"): _refused("gcsfs has no per-host proxy exclusions"),
    _with("default_content_type"): _checked(lambda n, v: str(v)),
    _with("http1_only", "http2_only", "http2_keep_alive_while_idle", "randomize_addresses"): _checked(
        parse_bool
    ),
    _with("http2_keep_alive_interval", "http2_keep_alive_timeout", "pool_idle_timeout"): _checked(
        parse_duration
    ),
    _with("http2_max_frame_size", "pool_max_idle_per_host"): _checked(parse_count),
    ("client_max_retries",): _attempts,
    ("client_retry_timeout",): _checked(parse_duration),
    ("download_retry_count",): _checked(parse_count),
}  # fmt: skip

#: gcsfs's own argument names that are safe here
_GCSFS = {
    **{n: _kwarg(n) for n in ("project", "token", "endpoint_url", "requester_pays", "access",
                               "consistency", "default_location", "block_size", "session_kwargs")},
    "cache_timeout": _refused(_LISTING_CACHE),
    "use_listings_cache": _refused(_LISTING_CACHE),
    "listings_expiry_time": _refused(_LISTING_CACHE),
    "asynchronous": _refused(_EVENT_LOOP),
    "loop": _refused(_EVENT_LOOP),
}  # fmt: skip

_HANDLERS: dict[str, Handler] = {**{n: h for names, h in _PYLANCE.items() for n in names}, **_GCSFS}
_ENV_NAMES = frozenset(n for names in _PYLANCE for n in names if n.startswith("google_"))
#: read by google-auth itself, or overridden by the URI's bucket
_ENV_LEFT_ALONE = frozenset(("google_application_credentials", "google_bucket", "google_bucket_name"))

#: every storage option name accepted for GCS (pylance's spellings, then gcsfs's own)
KNOWN_GCS_OPTIONS: tuple[str, ...] = tuple(sorted({n for names in _PYLANCE for n in names})) + tuple(
    sorted(n for n, h in _GCSFS.items() if n not in ("cache_timeout", "use_listings_cache",
                                                      "listings_expiry_time", "asynchronous", "loop"))
)  # fmt: skip


def gcs_settings(options: Mapping[str, Any], bucket: str) -> GCSSettings:
    """The settings that ``options`` and the ``GOOGLE_*`` environment variables ask for.

    Explicit options win over the environment. ``GOOGLE_APPLICATION_CREDENTIALS`` is left to
    google-auth, which reads it itself.

    Raises:
        StorageOptionsError: an unknown, refused or twice-given name, or a bad value.
    """
    settings = GCSSettings(bucket)
    given: dict[Handler, str] = {}
    pending: list[tuple[Handler, str, Any]] = []
    for raw, value in options.items():
        if not isinstance(raw, str):
            raise StorageOptionsError(repr(raw), "option names must be strings", known=KNOWN_GCS_OPTIONS)
        handler = _HANDLERS.get(raw.lower())
        if handler is None:
            raise StorageOptionsError(raw, "is not a known GCS storage option", known=KNOWN_GCS_OPTIONS)
        if handler in given:
            raise StorageOptionsError(raw, f"is the same option as {given[handler]!r}, given twice")
        given[handler] = raw
        pending.append((handler, raw, value))
    for env, value in sorted(os.environ.items()):
        name = env.lower()
        if name in _ENV_NAMES and name not in _ENV_LEFT_ALONE:
            handler = _HANDLERS[name]
            if handler not in given:
                given[handler] = env
                pending.append((handler, env, value))
    for handler, name, value in pending:
        handler(settings, name, value)
    return settings


def open_gcs(uri: str, rest: str, options: Mapping[str, Any]) -> Storage:
    """The storage of a ``gs://bucket/path`` dataset.

    Raises:
        ImportError: gcsfs is not installed.
        StorageOptionsError: see :func:`gcs_settings`.
    """
    bucket = rest.split("/", 1)[0]
    settings = gcs_settings(options, bucket)
    try:
        import gcsfs  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("gs:// datasets need gcsfs: pip install 'lance_table[gcs]'") from exc
    from lance_table.storage.gcs_client import gcs_filesystem
    from lance_table.storage.remote import GCSStorage

    fs = gcs_filesystem(settings)
    fingerprint = {**settings.kwargs, "attempts": settings.attempts, "headers": settings.headers}
    fingerprint.update(connect=settings.connect_timeout, timeout=settings.timeout)
    return GCSStorage(fs, rest.strip("/"), uri, access=options_fingerprint(fingerprint))


__all__ = ["KNOWN_GCS_OPTIONS", "GCSSettings", "gcs_settings", "open_gcs"]
