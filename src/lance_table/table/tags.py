"""Tags: names for versions, stored as ``_refs/tags/<name>.json`` in pylance's format."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from lance_table.errors import CorruptFileError, TagError
from lance_table.format import paths
from lance_table.storage import Storage
from lance_table.table import versions


@dataclass(frozen=True)
class Tag:
    name: str
    version: int
    created_at: dt.datetime
    updated_at: dt.datetime
    manifest_size: int
    metadata: dict[str, Any]


def _now() -> str:
    """UTC time as pylance writes it: nanoseconds and a ``Z`` suffix."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond * 1000:09d}Z"


def _parse_time(text: str) -> dt.datetime:
    base, _, frac = text.rstrip("Z").partition(".")
    value = dt.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    return value.replace(microsecond=int((frac + "000000")[:6])) if frac else value


class Tags:
    """The tags of a dataset: ``create``, ``update``, ``delete``, ``list``, ``get_version``."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def _manifest_size(self, version: int) -> int:
        return self._storage.size(versions.find_entry(self._storage, version).path)

    def _write(self, name: str, version: int, created: str, metadata: dict[str, Any]) -> bytes:
        body = {
            "branch": None,
            "version": version,
            "createdAt": created,
            "updatedAt": _now(),
            "manifestSize": self._manifest_size(version),
            "metadata": metadata,
        }
        return json.dumps(body, indent=2).encode()

    def _read(self, name: str) -> dict[str, Any]:
        path = paths.tag_path(paths.check_tag_name(name))
        try:
            data = self._storage.read(path)
        except FileNotFoundError:
            raise TagError(f"tag {name!r} does not exist") from None
        try:
            body = json.loads(data)
            int(body["version"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFileError(
                f"{self._storage.uri.rstrip('/')}/{path}", f"tag file is not valid ({exc})"
            ) from exc
        return body

    def create(self, name: str, version: int) -> None:
        """Name ``version``.

        Raises:
            TagError: the tag exists already or the name is invalid.
            VersionNotFoundError: the version does not exist.
        """
        try:
            paths.check_tag_name(name)
        except ValueError as exc:
            raise TagError(str(exc)) from None
        data = self._write(name, version, _now(), {})
        try:
            self._storage.put_if_absent(paths.tag_path(name), data)
        except FileExistsError:
            raise TagError(f"tag {name!r} already exists") from None

    def update(self, name: str, version: int) -> None:
        """Point an existing tag at another version.

        Raises:
            TagError: the tag does not exist.
            VersionNotFoundError: the version does not exist.
        """
        body = self._read(name)
        self._storage.write(
            paths.tag_path(name), self._write(name, version, body["createdAt"], body.get("metadata") or {})
        )

    def delete(self, name: str) -> None:
        """Remove a tag.

        Raises:
            TagError: the tag does not exist.
        """
        self._read(name)
        self._storage.delete(paths.tag_path(name))

    def get_version(self, name: str) -> int:
        """The version a tag names.

        Raises:
            TagError: the tag does not exist.
        """
        return int(self._read(name)["version"])

    def list(self) -> dict[str, Tag]:
        """Every tag, by name."""
        out = {}
        for entry in self._storage.list_dir(paths.TAGS_DIR):
            if not entry.name.endswith(".json"):
                continue
            name = entry.name[: -len(".json")]
            body = self._read(name)
            out[name] = Tag(
                name=name,
                version=int(body["version"]),
                created_at=_parse_time(body.get("createdAt", "1970-01-01T00:00:00Z")),
                updated_at=_parse_time(body.get("updatedAt", "1970-01-01T00:00:00Z")),
                manifest_size=int(body.get("manifestSize", 0)),
                metadata=body.get("metadata") or {},
            )
        return out
