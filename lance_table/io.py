"""pylance's ``lance.io``: utilities for customizing how datasets reach cloud storage. pylance 14's
module defines nothing yet; lance_table's storage layer is :mod:`lance_table.storage`
(``storage_options=`` of every call that opens a dataset)."""

from __future__ import annotations

__all__: list[str] = []
