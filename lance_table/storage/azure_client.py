"""The adlfs filesystem behind :mod:`lance_table.storage.azure` (imports adlfs: load it lazily).

adlfs builds its Azure SDK client from a few arguments of its own and passes no retry, timeout or
proxy setting to it; the filesystem here builds that client itself, from the settings, so that
every option pylance takes for Azure reaches the client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import adlfs
from azure.storage.blob.aio import BlobServiceClient

#: attempts the Azure SDK makes for a failing request unless ``client_max_retries`` says otherwise
#: (its own default, 10 with exponential back-off, keeps an unreachable endpoint busy for minutes)
DEFAULT_RETRIES = 3


class BlobFileSystem(adlfs.AzureBlobFileSystem):
    """adlfs, with a service client built from :class:`AzureSettings` (URL, credential, retries,
    timeouts, proxy); listings are never cached (see ``FsspecStorage._fresh``)."""

    protocol = ("abfs", "az", "abfss")

    def __init__(
        self,
        *,
        account: str,
        account_url: str,
        credential: Callable[[], Any],
        connection_string: str | None,
        client: dict[str, Any],
        **kwargs: Any,
    ) -> None:
        self._lt_url = account_url
        self._lt_credential = credential()  # a factory: fsspec caches instances by their arguments' text
        self._lt_connection_string = connection_string
        self._lt_client = {"retry_total": DEFAULT_RETRIES, **client}
        super().__init__(
            account_name=account,
            anon=True,  # no credential of adlfs's own: do_connect below sets the client's
            use_listings_cache=False,
            **kwargs,
        )

    def do_connect(self) -> None:
        if self._lt_connection_string:
            self.service_client = BlobServiceClient.from_connection_string(
                self._lt_connection_string, **self._lt_client
            )
        else:
            self.service_client = BlobServiceClient(
                self._lt_url, credential=self._lt_credential, **self._lt_client
            )


__all__ = ["DEFAULT_RETRIES", "BlobFileSystem"]
