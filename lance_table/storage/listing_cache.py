"""Listings of local directories, reused while the directory provably has not changed.

Opening the latest version and every commit list ``_versions``; after thousands of commits that
is a listing of thousands of names, each call. A directory's modification and change times
(``st_mtime``, ``st_ctime``) move whenever an entry is added, removed or renamed, so a listing
taken when those times were already some while in the past stays exact for as long as a ``stat``
of the directory shows the same times, inode and device: a later change gets a later timestamp.

That holds only where the kernel keeps those times itself, on a disk it owns. A listing is
reused only on such file systems (Linux, recognized through ``/proc/self/mountinfo``): never on a
network file system (whose times come from another clock, and whose attributes are cached) nor
on a FUSE mount of an object store (where directory times may never change). Timestamps are
coarse (a clock tick, or a whole second on some file systems): a listing is kept only when the
directory's newest timestamp is older than :data:`SETTLED_NS` (:data:`SETTLED_COARSE_NS` for
whole-second times) at the moment of the ``stat`` that precedes it, so a change made after it
cannot share its timestamps.

:func:`list_files` keeps the sizes and times of the files as well, for directories whose files are
only ever created whole and removed, never changed in place (``_versions``: a manifest is written
once under a new name). A file changed in place leaves its directory's times as they were, so the
sizes and times kept of such a file would go stale.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from lance_table._lru import LRU
from lance_table._parallel import after_fork_in_child
from lance_table.storage.base import Entry

#: file systems whose directory times the kernel updates on every change of their entries
LOCAL_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "bcachefs", "jfs"}
)
#: how long (ns) a directory must have been unchanged before a listing of it is kept
SETTLED_NS = 100_000_000
#: the same where its times are whole seconds (a file system with coarse timestamps)
SETTLED_COARSE_NS = 2_100_000_000
#: directories whose listings are kept (the least recently used go first)
MAX_DIRECTORIES = 64
#: smaller directories are listed each time (a listing of a few names costs about a ``stat``)
MIN_NAMES = 64
#: directories whose listings with sizes and times are kept (some 150 bytes a file)
MAX_FILE_LISTINGS = 16

_Token = tuple[int, int, int, int, int, int]
_LISTINGS: LRU[str, tuple[_Token, tuple[str, ...]]] = LRU(MAX_DIRECTORIES)
_FILE_LISTINGS: LRU[tuple[str, str], tuple[_Token, tuple[Entry, ...]]] = LRU(MAX_FILE_LISTINGS)
#: guards :data:`_FS_TYPES`
_LOCK = threading.Lock()
#: device -> file system type, as read from the mount table at a time (monotonic ns)
_FS_TYPES: dict[int, tuple[str | None, int]] = {}
#: how long (ns) what the mount table said of a device is believed: a device number freed by an
#: unmount may be given to another file system
MOUNTS_TTL_NS = 5_000_000_000


def _new_lock() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # a forked child: another thread may have held it at the fork


after_fork_in_child(_new_lock)


def list_names(full: str) -> list[str]:
    """``os.listdir(full)``, or the names of the last listing of ``full`` where the directory is
    provably unchanged since (see the module's description).

    Raises:
        FileNotFoundError, NotADirectoryError: as ``os.listdir``.
    """
    token = _token(full)
    if token is not None:
        hit = _LISTINGS.get(full)
        if hit is not None and hit[0] == token:
            return list(hit[1])
    names = os.listdir(full)
    if token is not None and len(names) >= MIN_NAMES:
        _LISTINGS.put(full, (token, tuple(names)))
    return names


def list_files(full: str, prefix: str) -> tuple[Entry, ...]:
    """The files directly inside ``full`` (not subdirectories) with their sizes and modification
    times, each path ``prefix`` and its name; the very same tuple as the last call's where the
    directory is provably unchanged since (see the module's description), so a caller may key
    what it worked out from it by identity. Only for directories whose files are never changed
    in place (their sizes and times are kept).

    Raises:
        FileNotFoundError, NotADirectoryError: as ``os.scandir``.
    """
    token = _token(full)
    if token is not None:
        hit = _FILE_LISTINGS.get((full, prefix))
        if hit is not None and hit[0] == token:
            return hit[1]
    out = []
    with os.scandir(full) as it:
        for e in it:
            if e.is_file():
                try:
                    st = e.stat()
                except FileNotFoundError:  # deleted since the directory was read
                    continue
                out.append(Entry(prefix + e.name, st.st_size, st.st_mtime))
    found = tuple(out)
    if token is not None and len(found) >= MIN_NAMES:
        _FILE_LISTINGS.put((full, prefix), (token, found))
    return found


def clear() -> None:
    """Forget every kept listing."""
    _LISTINGS.clear()
    _FILE_LISTINGS.clear()


def state_token(full: str) -> _Token | None:
    """The state of file or directory ``full`` as a ``stat`` shows it now (device, inode, times,
    size, links), on a local file system whose times the kernel keeps (None elsewhere, or when it
    does not exist). Unlike the tokens listings are kept by, it is taken however recent the last
    change is: a change within the same clock tick as the last one before it may leave it as it
    was, so an equal token says only that nothing changed since, short of such a change."""
    try:
        st = os.stat(full)
    except OSError:
        return None
    if _fs_type(st.st_dev) not in LOCAL_FILE_SYSTEMS:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_nlink


def _token(full: str) -> _Token | None:
    """What identifies the directory's state (device, inode, modification and change times, size
    and links: some file systems count entries in a directory's size), if
    a listing of it may be kept and reused: it is on a local file system and has been unchanged
    long enough. Taken before the listing: a change during the listing moves it."""
    try:
        st = os.stat(full)
    except OSError:
        return None
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    coarse = st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0
    age = time.time_ns() - newest
    if age < (SETTLED_COARSE_NS if coarse else SETTLED_NS):  # (negative: a time in the future)
        return None
    if _fs_type(st.st_dev) not in LOCAL_FILE_SYSTEMS:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_nlink


def _fs_type(dev: int) -> str | None:
    """The type of the file system mounted as device ``dev`` (None where it cannot be told)."""
    now = time.monotonic_ns()
    known = _FS_TYPES.get(dev)
    if known is not None and now - known[1] < MOUNTS_TTL_NS:
        return known[0]
    mounted = _mounted_types()
    with _LOCK:
        _FS_TYPES.clear()
        _FS_TYPES.update((d, (kind, now)) for d, kind in mounted.items())
        _FS_TYPES.setdefault(dev, (None, now))
    return mounted.get(dev)


def _mounted_types() -> dict[int, str]:
    """Device number -> file system type of every mount this process sees (Linux only)."""
    if not sys.platform.startswith("linux"):
        return {}
    out: dict[int, str] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields, _, rest = line.partition(" - ")
                parts = fields.split()
                if len(parts) < 3 or not rest:
                    continue
                major, _, minor = parts[2].partition(":")
                try:
                    dev = os.makedev(int(major), int(minor))
                except ValueError:
                    continue
                kind = rest.split(" ", 1)[0]
                # a device mounted twice with different types is not trusted
                out[dev] = kind if out.get(dev, kind) == kind else ""
    except OSError:
        return {}
    return out


__all__ = ["clear", "list_files", "list_names", "state_token"]
