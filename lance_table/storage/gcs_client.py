"""The gcsfs filesystem behind :mod:`lance_table.storage.gcs` (imports gcsfs: load it lazily).

gcsfs's package root swaps in an experimental filesystem that first asks a gRPC control API about
every bucket (zonal or not), waiting up to a minute where that API is not served (emulators,
proxies); the plain JSON-API filesystem of ``gcsfs.core`` is used instead. gcsfs retries a failed
request 6 times for every filesystem; here the number of attempts, the timeouts and the user agent
follow the settings.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from gcsfs.core import GCSFileSystem
from gcsfs.retry import retry_request

_UNRETRIED = GCSFileSystem._request.__wrapped__


class GCSClientFileSystem(GCSFileSystem):
    """gcsfs with per-filesystem attempts and headers; listings are never cached."""

    def __init__(self, *, attempts: int, headers: dict[str, str], **kwargs: Any) -> None:
        self._lt_attempts = attempts
        self._lt_headers = headers
        super().__init__(use_listings_cache=False, **kwargs)

    async def _request(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        call = retry_request(retries=max(1, self._lt_attempts))(_UNRETRIED)
        return await call(self, method, path, *args, **kwargs)

    def _get_headers(self, headers: Any, **kwargs: Any) -> dict[str, str]:
        out: dict[str, str] = super()._get_headers(headers, **kwargs)
        out.update(self._lt_headers)
        return out


def gcs_filesystem(settings: Any) -> GCSClientFileSystem:
    """A gcsfs filesystem as ``settings`` (a ``lance_table.storage.gcs.GCSSettings``) ask."""
    kwargs = dict(settings.kwargs)
    if settings.timeout is not None or settings.connect_timeout is not None:
        kwargs["requests_timeout"] = aiohttp.ClientTimeout(
            total=settings.timeout, sock_connect=settings.connect_timeout
        )
    return GCSClientFileSystem(attempts=settings.attempts, headers=settings.headers, **kwargs)


__all__ = ["GCSClientFileSystem", "gcs_filesystem"]
