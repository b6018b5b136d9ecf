"""Where an external blob v2 value may be read from.

A descriptor of kind external stores a URI and a ``blob_id``. As pylance 14 writes them, a
``blob_id`` above 0 names one of the manifest's registered base paths and the URI is a path
relative to it; ``blob_id`` 0 is an absolute URI (pylance writes those only when told to store
URIs outside the registered bases). The URI comes from a data file and is untrusted: it could name
any file of the machine, a host on the network, or a path relative to the process's working
directory. lance_table opens only locations below a registered base path, with a scheme it knows;
anything else is refused with :class:`BlobLocationError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from lance_table.errors import BlobLocationError
from lance_table.format.bases import BasePath

# The object stores a registered base may live in (pylance's, plus memory:// for tests).
KNOWN_SCHEMES = frozenset({"file", "memory", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})


@dataclass(frozen=True)
class BlobLocation:
    """A checked external location: ``parent`` (a URI or absolute local path that
    :func:`~lance_table.storage.open_storage` opens) and the object's ``name`` in it."""

    parent: str
    name: str


def _split(location: str, uri: str, what: str) -> tuple[str, list[str]]:
    """``location`` (an absolute URI or local path) as its scheme and its path segments.

    Raises:
        BlobLocationError: not absolute, an unknown scheme, or ``.``/``..``/empty segments.
    """
    if "://" in location:
        scheme, rest = location.split("://", 1)
        scheme = scheme.lower()
        if scheme not in KNOWN_SCHEMES:
            raise BlobLocationError(uri, f"{what} has the scheme {scheme!r}, which is not an object store")
        if scheme == "file":
            if not rest.startswith("/"):
                raise BlobLocationError(uri, f"{what} is a file URI with a host or a relative path")
            rest = unquote(rest)
    elif location.startswith("/"):
        scheme, rest = "file", location
    else:
        raise BlobLocationError(
            uri, f"{what} is a relative path (it would resolve against the working directory)"
        )
    if "\\" in rest or "\x00" in rest:
        raise BlobLocationError(uri, f"{what} holds a backslash or a NUL character")
    parts = rest.strip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BlobLocationError(uri, f"{what} has empty, '.' or '..' path segments")
    return scheme, parts


def _located(scheme: str, parts: list[str]) -> BlobLocation:
    parent = "/".join(parts[:-1])
    return BlobLocation("/" + parent if scheme == "file" else f"{scheme}://{parent}", parts[-1])


def external_reference(uri: str, bases: Mapping[int, BasePath], allow_outside: bool) -> tuple[int, str]:
    """How a written external blob's URI is stored, as pylance 14 stores it: the id of the deepest
    registered base path it lies below (bases that are dataset roots do not count) and its path
    relative to that base; else, with ``allow_outside`` (``allow_external_blob_outside_bases``),
    id 0 and the URI as given, which must then be an absolute URI (``file:///...`` locally).

    Raises:
        BlobLocationError: the URI is outside every base without ``allow_outside``, not an absolute
            URI or path, has an unknown scheme or ``.``, ``..`` or empty path segments (pylance
            normalizes the last three; lance_table refuses them).
    """
    scheme, parts = _split(uri, uri, "the URI")
    best: tuple[int, int] | None = None
    for base_id, base in sorted(bases.items()):
        if base.is_dataset_root:
            continue
        try:
            base_scheme, root = _split(base.path, base.path, "a base path")
        except BlobLocationError:
            continue
        below = base_scheme == scheme and len(parts) > len(root) and parts[: len(root)] == root
        if below and (best is None or len(root) > best[1]):
            best = (base_id, len(root))
    if best is not None:
        return best[0], "/".join(parts[best[1] :])
    if not allow_outside:
        raise BlobLocationError(
            uri,
            "it is outside the dataset's registered external base paths (bases that are not dataset "
            "roots); register its base or pass allow_external_blob_outside_bases=True to store it as "
            "an absolute URI",
        )
    if "://" not in uri:
        raise BlobLocationError(uri, "it is outside the registered base paths and not an absolute URI")
    return 0, uri


def resolve_external(uri: str, blob_id: int, bases: Mapping[int, BasePath]) -> BlobLocation:
    """The location an external blob descriptor (``blob_uri``, ``blob_id``) names.

    Raises:
        BlobLocationError: the location is not below a registered base path, the base or the URI
            has an unknown scheme, or the relative path escapes its base.
    """
    if blob_id:
        base = bases.get(blob_id)
        if base is None:
            raise BlobLocationError(
                uri, f"it is relative to base path {blob_id}, which the manifest does not register"
            )
        if not uri or "://" in uri or uri.startswith("/"):
            raise BlobLocationError(uri, f"it is not a path relative to base path {blob_id}")
        scheme, root = _split(base.path, uri, f"its base path {base.path!r}")
        _, rel = _split("/" + uri, uri, "the path")
        return _located(scheme, root + rel)
    scheme, parts = _split(uri, uri, "the URI")
    for base in bases.values():
        try:
            base_scheme, root = _split(base.path, base.path, "a base path")
        except BlobLocationError:
            continue
        if base_scheme == scheme and len(parts) > len(root) and parts[: len(root)] == root:
            return _located(scheme, parts)
    raise BlobLocationError(uri, "it is outside the dataset's registered base paths")
