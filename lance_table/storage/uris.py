"""Local dataset URIs in every spelling users and engines pass them.

Spark and Hadoop hand over ``file:/abs`` (one slash), Python's ``pathlib`` gives ``file:///abs``, some
tools write ``file://localhost/abs``; users type ``~/x`` and relative paths. All of them name the
same directory on this machine, so they all become one absolute path here, before any storage is
opened (a ``file:`` URI taken as a relative path would create a folder named ``file:``).
"""

from __future__ import annotations

import os
from urllib.parse import unquote

from lance_table.errors import InvalidURIError

_LOCAL_HOSTS = ("", "localhost", "127.0.0.1")


def local_path(text: str) -> str | None:
    """The absolute local path ``text`` names, or None when it is not a local URI or path.

    ``file:`` URIs are percent-decoded (``file:/a%20b`` is the folder ``a b``) as pylance does;
    plain paths are taken literally (a ``%`` in a path is a ``%``), with ``~`` expanded.

    Raises:
        InvalidURIError: a ``file:`` URI names another host, or has no absolute path.
    """
    if text.startswith("file:"):
        return _file_uri_path(text)
    if "://" in text:
        return None
    return os.path.abspath(os.path.expanduser(text))


def _file_uri_path(text: str) -> str:
    rest = text[len("file:") :]
    if rest.startswith("//"):  # an authority: file://host/abs or file:///abs
        host, slash, path = rest[2:].partition("/")
        if host.lower() not in _LOCAL_HOSTS:
            raise InvalidURIError(
                text,
                f"names the host {host!r}; a file: URI must name this machine "
                "(file:/path, file:///path or file://localhost/path)",
            )
        path = slash + path
    else:
        path = rest
    if not path.startswith("/"):
        raise InvalidURIError(
            text, "is not an absolute file: URI (file:/path, file:///path or file://localhost/path)"
        )
    path = unquote(path.split("?", 1)[0].split("#", 1)[0])
    return os.path.abspath(path)


__all__ = ["local_path"]
