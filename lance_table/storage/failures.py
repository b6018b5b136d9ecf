"""Turning the failures of remote storage clients into lance_table's typed errors.

A client library (botocore under s3fs, aiohttp, gcsfs, adlfs) reports an unreachable endpoint or
missing credentials with its own exception classes; callers should not need to import them. They
are recognized by class name (no client library is imported here) and re-raised as
:class:`StorageUnreachableError` (a ``ConnectionError``) or :class:`StorageCredentialsError` (a
``PermissionError``) naming the dataset. Everything else, ``FileNotFoundError`` included, passes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from lance_table.errors import LanceTableError, StorageCredentialsError, StorageUnreachableError

_CREDENTIALS = frozenset(
    (
        "NoCredentialsError",
        "PartialCredentialsError",
        "CredentialRetrievalError",
        "NoAuthTokenError",
        "ClientAuthenticationError",  # azure
        "DefaultCredentialsError",  # google
        "RefreshError",
    )
)
_UNREACHABLE = frozenset(
    (
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ConnectionClosedError",
        "ReadTimeoutError",
        "ProxyConnectionError",
        "ClientConnectorError",  # aiohttp
        "ServerTimeoutError",
        "ServiceRequestError",  # azure
        "FSTimeoutError",
    )
)

F = TypeVar("F", bound=Callable[..., Any])


def translated(error: BaseException, uri: str) -> LanceTableError | None:
    """lance_table's error for a client failure, or None when ``error`` is not one of those."""
    if isinstance(error, LanceTableError | FileNotFoundError | FileExistsError):
        return None
    names = {cls.__name__ for cls in type(error).__mro__}
    detail = f"{type(error).__name__}: {error}"
    if names & _CREDENTIALS or isinstance(error, PermissionError):
        return StorageCredentialsError(uri, detail)
    if names & _UNREACHABLE or isinstance(error, ConnectionError | TimeoutError):
        return StorageUnreachableError(uri, detail)
    return None


def typed_failures(method: F) -> F:
    """``method`` of an object with a ``uri``, raising typed errors for client failures."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            typed = translated(exc, getattr(self, "uri", "") or getattr(self, "_name", ""))
            if typed is None:
                raise
            raise typed from exc

    return call  # type: ignore[return-value]


#: the Storage methods that talk to the store
STORAGE_METHODS = (
    "read",
    "read_ranges",
    "size",
    "write",
    "open_writer",
    "put_if_absent",
    "list_dir",
    "list_created_files",
    "list_names",
    "list_names_page",
    "list_tree",
    "delete",
    "delete_many",
    "exists",
)


def wrap_methods(cls: type, names: tuple[str, ...]) -> None:
    """Wrap the methods ``cls`` itself defines among ``names`` with :func:`typed_failures`."""
    for name in names:
        method = cls.__dict__.get(name)
        if method is not None and not getattr(method, "__wrapped__", None):
            setattr(cls, name, typed_failures(method))


__all__ = ["STORAGE_METHODS", "translated", "typed_failures", "wrap_methods"]
