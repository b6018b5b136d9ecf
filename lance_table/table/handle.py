"""The state every part of the dataset handle shares: the snapshot it reads, and where its writes
go (:meth:`Handle._committed`)."""

from __future__ import annotations

from typing import Any, TypeVar

from lance_table.format.manifest import Manifest
from lance_table.storage import Storage
from lance_table.table.snapshot import Snapshot

_Result = TypeVar("_Result")
_H = TypeVar("_H", bound="Handle")


class Handle:
    """A handle on one snapshot of a dataset; writes through it move it."""

    _snapshot: Snapshot
    #: pylance's ``default_scan_options``: scan options every scan through the handle starts from
    _default_scan_options: dict[str, Any] | None = None

    def _scan_options(self, given: dict[str, Any]) -> dict[str, Any]:
        """``given`` scan options over the handle's defaults (an option given as None takes the
        default, as in pylance)."""
        defaults = self._default_scan_options
        if not defaults:
            return given
        return {**given, **{k: v for k, v in defaults.items() if given.get(k) is None}}

    def _carry(self, other: _H) -> _H:
        """``other`` (another handle of the same dataset) with this handle's scan defaults."""
        other._default_scan_options = self._default_scan_options
        return other

    def _committed(self, snapshot: Snapshot, result: _Result = None) -> _Result:  # type: ignore[assignment]
        """Where every write through this handle ends: the handle moves to the version the write
        committed (as pylance's does), and the caller gets ``result`` (what pylance returns for that
        write: None, a dict of counts, metrics)."""
        self._snapshot = snapshot
        return result

    @property
    def uri(self) -> str:
        """The dataset's URI."""
        return self._snapshot.uri

    @property
    def version(self) -> int:
        """The version this handle reads (a write through it moves it)."""
        return self._snapshot.version

    @property
    def manifest(self) -> Manifest:
        """The manifest of the version this handle reads."""
        return self._snapshot.manifest

    @property
    def _storage(self) -> Storage:
        return self._snapshot.storage


__all__ = ["Handle"]
