"""Azure Blob Storage: pylance's ``azure_*`` storage options turned into an adlfs filesystem.

pylance takes the option names of its object store client (``azure_storage_account_name``,
``azure_storage_account_key``, ``azure_storage_sas_token``, ``azure_storage_use_emulator``, ...,
each with its aliases) and reads the ``AZURE_*`` environment variables of the same names. Here each
name is mapped to the Azure SDK client that adlfs drives (account URL, credential, retries and
timeouts), accepted as having no meaning for it, or refused with the reason. Explicit options win
over the environment; a bad value in either is a :class:`StorageOptionsError` naming it.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_table.errors import StorageCredentialsError, StorageOptionsError
from lance_table.storage.options import parse_bool, parse_count, parse_duration

#: the storage account and key every Azurite server knows (published in Azure's documentation)
EMULATOR_ACCOUNT = "devstoreaccount1"
EMULATOR_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: where the emulator is when neither ``AZURITE_BLOB_STORAGE_URL`` nor an endpoint says otherwise
EMULATOR_URL = "http://127.0.0.1:10000"


@dataclass
class AzureSettings:
    """What one set of Azure options asks for, before any client exists."""

    container: str
    account: str | None = None
    key: str | None = None
    sas: str | None = None
    token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    tenant_id: str | None = None
    connection_string: str | None = None
    endpoint: str | None = None
    emulator: bool = False
    fabric: bool = False
    anonymous: bool = False
    azure_cli: bool = False
    client: dict[str, Any] = field(default_factory=dict)  # Azure SDK client keyword arguments

    def fingerprint(self) -> dict[str, Any]:
        """The settings as plain data (for the storage's cache key, which hashes it)."""
        return {k: v for k, v in vars(self).items() if v not in (None, False, {})}


Handler = Callable[[AzureSettings, str, Any], None]


def _bad(name: str, problem: str) -> StorageOptionsError:
    return StorageOptionsError(name, problem)


def _set(attr: str, convert: Callable[[str, Any], Any] | None = None) -> Handler:
    def handle(s: AzureSettings, name: str, value: Any) -> None:
        setattr(s, attr, convert(name, value) if convert else str(value))

    return handle


def _client(key: str, convert: Callable[[str, Any], Any]) -> Handler:
    def handle(s: AzureSettings, name: str, value: Any) -> None:
        s.client[key] = convert(name, value)

    return handle


def _retries(s: AzureSettings, name: str, value: Any) -> None:
    s.client["retry_total"] = parse_count(name, value)


def _invalid_certificates(s: AzureSettings, name: str, value: Any) -> None:
    if parse_bool(name, value):
        s.client["connection_verify"] = False


def _proxy(s: AzureSettings, name: str, value: Any) -> None:
    s.client["proxies"] = {"http": str(value), "https": str(value)}


def _container(s: AzureSettings, name: str, value: Any) -> None:
    if str(value) != s.container:
        raise _bad(name, f"names container {value!r}, but the URI's container is {s.container!r}")


def _sas(s: AzureSettings, name: str, value: Any) -> None:
    s.sas = str(value).lstrip("?")


def _checked(convert: Callable[[str, Any], Any]) -> Handler:
    """An option that has no meaning for the Azure SDK client: its value is checked, nothing else."""

    def handle(s: AzureSettings, name: str, value: Any) -> None:
        convert(name, value)

    return handle


def _refused(reason: str) -> Handler:
    def handle(s: AzureSettings, name: str, value: Any) -> None:
        raise _bad(name, f"is not supported: {reason}")

    _REFUSED.add(handle)
    return handle


_REFUSED: set[Handler] = set()


_IDENTITY = (
    "managed identities and workload identity are found by azure-identity's DefaultAzureCredential "
    "from its own environment variables (AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE, IDENTITY_ENDPOINT, ...)"
)
_ENVIRONMENT = "the Azure SDK takes it from the environment ({})"


def _with(*names: str) -> tuple[str, ...]:
    """Client options: object_store takes each bare and with an ``azure_`` prefix."""
    return names + tuple(f"azure_{n}" for n in names)


# pylance's names (object_store's AzureConfigKey and client keys, and lance's own) -> handler.
_PYLANCE: dict[tuple[str, ...], Handler] = {
    ("azure_storage_account_name", "account_name"): _set("account"),
    (
        "azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
        "master_key", "account_key", "access_key",
    ): _set("key"),
    ("azure_storage_client_id", "azure_client_id", "client_id"): _set("client_id"),
    ("azure_storage_client_secret", "azure_client_secret", "client_secret"): _set("client_secret"),
    (
        "azure_storage_tenant_id", "azure_storage_authority_id", "azure_tenant_id",
        "azure_authority_id", "tenant_id", "authority_id",
    ): _set("tenant_id"),
    ("azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token"): _sas,
    ("azure_storage_token", "bearer_token", "token"): _set("token"),
    ("azure_storage_use_emulator", "object_store_use_emulator", "use_emulator"): _set("emulator", parse_bool),
    ("azure_storage_endpoint", "azure_endpoint", "endpoint"): _set("endpoint"),
    ("azure_use_fabric_endpoint", "use_fabric_endpoint"): _set("fabric", parse_bool),
    ("azure_skip_signature", "skip_signature"): _set("anonymous", parse_bool),
    ("azure_use_azure_cli", "use_azure_cli"): _set("azure_cli", parse_bool),
    ("azure_container_name", "container_name"): _container,
    ("azure_storage_connection_string", "connection_string"): _set("connection_string"),
    # lance_table never tags blobs: nothing to disable
    ("azure_disable_tagging", "disable_tagging"): _checked(parse_bool),
    ("azure_storage_authority_host", "azure_authority_host", "authority_host"): _refused(
        _ENVIRONMENT.format("AZURE_AUTHORITY_HOST")
    ),
    (
        "azure_msi_endpoint", "azure_identity_endpoint", "identity_endpoint", "msi_endpoint",
        "azure_object_id", "object_id", "azure_msi_resource_id", "msi_resource_id",
        "azure_federated_token_file", "federated_token_file",
    ): _refused(_IDENTITY),
    (
        "azure_fabric_token_service_url", "fabric_token_service_url", "azure_fabric_workload_host",
        "fabric_workload_host", "azure_fabric_session_token", "fabric_session_token",
        "azure_fabric_cluster_identifier", "fabric_cluster_identifier",
    ): _refused("Microsoft Fabric's token service has no equivalent in the Azure SDK for Python"),
    _with("allow_http"): _checked(parse_bool),  # the Azure SDK follows the endpoint's own scheme
    _with("allow_invalid_certificates"): _invalid_certificates,
    _with("connect_timeout"): _client("connection_timeout", parse_duration),
    _with("timeout", "request_timeout", "read_timeout"): _client("read_timeout", parse_duration),
    _with("user_agent"): _client("user_agent", lambda n, v: str(v)),
    _with("proxy_url"): _proxy,
    _with("proxy_ca_certificate"): _refused(_ENVIRONMENT.format("REQUESTS_CA_BUNDLE")),
    _with("proxy_excludes"): _refused(_ENVIRONMENT.format("NO_PROXY")),
    _with("default_content_type"): _checked(lambda n, v: str(v)),
    _with("http1_only", "http2_only", "http2_keep_alive_while_idle", "randomize_addresses"): _checked(
        parse_bool
    ),
    _with("http2_keep_alive_interval", "http2_keep_alive_timeout", "pool_idle_timeout"): _checked(
        parse_duration
    ),
    _with("http2_max_frame_size", "pool_max_idle_per_host"): _checked(parse_count),
    ("client_max_retries",): _retries,
    ("client_retry_timeout",): _checked(parse_duration),
    ("download_retry_count",): _checked(parse_count),
}  # fmt: skip

_HANDLERS: dict[str, Handler] = {n: h for names, h in _PYLANCE.items() for n in names}

#: every storage option name accepted for Azure
KNOWN_AZURE_OPTIONS: tuple[str, ...] = tuple(sorted(_HANDLERS))

#: environment variables read as options (object_store reads every ``AZURE_*`` variable that
#: names an option); the ones that only the Azure SDK's own credential chain reads are left to it
_ENV_SKIPPED = frozenset(
    n for names, h in _PYLANCE.items() for n in names if h in _REFUSED or h is _container
)


def azure_settings(options: Mapping[str, Any], container: str) -> AzureSettings:
    """The settings that ``options`` and the ``AZURE_*`` environment variables ask for.

    Names are case-insensitive; values may be strings, as pylance takes them. An explicit option
    wins over the environment variable of the same option.

    Raises:
        StorageOptionsError: an unknown name, a name given twice under two spellings, a refused
            name (with the reason), or a bad value.
    """
    settings = AzureSettings(container)
    given: dict[Handler, str] = {}
    pending: list[tuple[Handler, str, Any]] = []
    for raw, value in options.items():
        if not isinstance(raw, str):
            raise StorageOptionsError(repr(raw), "option names must be strings", known=KNOWN_AZURE_OPTIONS)
        handler = _HANDLERS.get(raw.lower())
        if handler is None:
            raise StorageOptionsError(raw, "is not a known Azure storage option", known=KNOWN_AZURE_OPTIONS)
        if handler in given:
            raise StorageOptionsError(raw, f"is the same option as {given[handler]!r}, given twice")
        given[handler] = raw
        pending.append((handler, raw, value))
    for env, value in sorted(os.environ.items()):
        name = env.lower()
        handler = _HANDLERS.get(name)
        if env.startswith("AZURE_") and handler not in (None, *given) and name not in _ENV_SKIPPED:
            assert handler is not None
            given[handler] = env
            pending.append((handler, env, value))
    for handler, name, value in pending:
        handler(settings, name, value)
    return settings


def account_url(settings: AzureSettings) -> str:
    """The blob service URL of the storage account the settings name.

    Raises:
        StorageCredentialsError: no storage account is named (and the emulator is not asked for).
    """
    if settings.endpoint:
        return settings.endpoint.rstrip("/")
    if settings.emulator:
        base = os.environ.get("AZURITE_BLOB_STORAGE_URL", EMULATOR_URL).rstrip("/")
        return f"{base}/{settings.account or EMULATOR_ACCOUNT}"
    if not settings.account:
        raise StorageCredentialsError(
            f"az://{settings.container}",
            "no Azure storage account: pass azure_storage_account_name (or set "
            "AZURE_STORAGE_ACCOUNT_NAME), an endpoint, or azure_storage_use_emulator",
        )
    domain = "blob.fabric.microsoft.com" if settings.fabric else "blob.core.windows.net"
    return f"https://{settings.account}.{domain}"


class _StaticToken:
    """An async token credential handing out one bearer token (``azure_storage_token``)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self._token, int(time.time()) + 3600)

    async def close(self) -> None:
        return None


def credential(settings: AzureSettings) -> Any:
    """The Azure SDK credential the settings name (None: anonymous, or in the connection string)."""
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential

    if settings.anonymous or settings.connection_string:
        return None
    if settings.key or (settings.emulator and not (settings.sas or settings.token)):
        return AzureNamedKeyCredential(settings.account or EMULATOR_ACCOUNT, settings.key or EMULATOR_KEY)
    if settings.sas:
        return AzureSasCredential(settings.sas)
    if settings.token:
        return _StaticToken(settings.token)
    from azure.identity import aio as identity

    if settings.client_id and settings.client_secret and settings.tenant_id:
        return identity.ClientSecretCredential(settings.tenant_id, settings.client_id, settings.client_secret)
    if settings.azure_cli:
        return identity.AzureCliCredential()
    return identity.DefaultAzureCredential()


def open_filesystem(settings: AzureSettings) -> Any:
    """An adlfs filesystem whose Azure SDK client follows ``settings``.

    Raises:
        ImportError: adlfs is not installed.
        StorageCredentialsError: no storage account is named.
    """
    try:
        import adlfs  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("az:// datasets need adlfs: pip install 'lance_table[azure]'") from exc
    from lance_table.storage.azure_client import BlobFileSystem

    return BlobFileSystem(
        account=settings.account or EMULATOR_ACCOUNT,
        account_url=account_url(settings),
        credential=functools.partial(credential, settings),
        connection_string=settings.connection_string,
        client=settings.client,
    )


__all__ = ["KNOWN_AZURE_OPTIONS", "AzureSettings", "account_url", "azure_settings", "open_filesystem"]
