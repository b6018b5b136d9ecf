"""Every name lance_table reads or writes inside a dataset directory, defined once."""

from __future__ import annotations

import re
import secrets
import uuid

from lance_table.errors import CorruptFileError

VERSIONS_DIR = "_versions"
DATA_DIR = "data"
DELETIONS_DIR = "_deletions"
TRANSACTIONS_DIR = "_transactions"
TAGS_DIR = "_refs/tags"
INDICES_DIR = "_indices"
LATEST_VERSION_HINT = f"{VERSIONS_DIR}/latest_version_hint.json"

MANIFEST_SUFFIX = ".manifest"
DATA_FILE_SUFFIX = ".lance"
TRANSACTION_SUFFIX = ".txn"
U64_MAX = 2**64 - 1
_V2_NAME = re.compile(r"^\d{20}\.manifest$")
_V1_NAME = re.compile(r"^(\d+)\.manifest$")
_TAG_NAME = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$")
# A tag name becomes a file name ``<name>.json``: keep it under the usual 255-byte limit.
MAX_TAG_NAME_LENGTH = 250


# The top bit of a version number marks a detached version: a manifest outside the version line,
# at a random number, named ``d{version}.manifest`` in either scheme (so it lists after them all).
DETACHED_VERSION_MASK = 1 << 63
DETACHED_PREFIX = "d"


def is_detached_version(version: int) -> bool:
    """Whether ``version`` is a detached version's number (its top bit is set)."""
    return bool(version & DETACHED_VERSION_MASK)


class ManifestNaming:
    """The two manifest naming schemes: V1 ``{version}.manifest`` and V2 (inverted, zero-padded)."""

    V1 = "v1"
    V2 = "v2"


def manifest_name(version: int, scheme: str = ManifestNaming.V2) -> str:
    """File name (inside ``_versions``) of a version's manifest."""
    if is_detached_version(version):
        return f"{DETACHED_PREFIX}{version}{MANIFEST_SUFFIX}"
    if scheme == ManifestNaming.V2:
        return f"{U64_MAX - version:020d}{MANIFEST_SUFFIX}"
    return f"{version}{MANIFEST_SUFFIX}"


def manifest_path(version: int, scheme: str = ManifestNaming.V2) -> str:
    return f"{VERSIONS_DIR}/{manifest_name(version, scheme)}"


# Length of a V2 manifest name: 20 digits and the suffix.
V2_NAME_LENGTH = 20 + len(MANIFEST_SUFFIX)


def is_v2_name(name: str) -> bool:
    """Whether ``name`` is a V2 manifest name (of a version of the main line)."""
    return _V2_NAME.fullmatch(name) is not None


def is_v1_name(name: str) -> bool:
    """Whether ``name`` is a V1 manifest name (and not a V2 one)."""
    return _V1_NAME.fullmatch(name) is not None and _V2_NAME.fullmatch(name) is None


def parse_manifest_name(name: str) -> tuple[int, str] | None:
    """``(version, scheme)`` of a manifest file name, or None for anything else.

    Temporary names, detached versions (``d...``) and other files are not manifests of the main line.
    """
    if _V2_NAME.match(name):
        return U64_MAX - int(name[:20]), ManifestNaming.V2
    m = _V1_NAME.match(name)
    if m:
        return int(m.group(1)), ManifestNaming.V1
    return None


def new_data_file_name(tag: str = "") -> str:
    """A data file name in pylance's style: 24 bits as ``0``/``1`` characters, then 26 hex digits.

    The binary prefix spreads object-store key prefixes. A ``tag`` (hex digits, at most 10) replaces
    the first hex digits, so that all files of one distributed write can be found by name.
    """
    raw = uuid.uuid4().bytes
    bits = "".join(f"{b:08b}" for b in raw[:3])
    if len(tag) > WRITE_TAG_LENGTH or any(c not in "0123456789abcdef" for c in tag):
        raise ValueError(f"invalid write tag {tag!r}")
    digits = tag + raw[3:].hex()[len(tag) :]
    return f"{bits}{digits}{DATA_FILE_SUFFIX}"


WRITE_TAG_LENGTH = 10


def has_write_tag(name: str, tag: str) -> bool:
    """Whether a data file name carries a write tag given to :func:`new_data_file_name`."""
    return len(name) == 24 + 26 + len(DATA_FILE_SUFFIX) and name[24 : 24 + len(tag)] == tag


# Random bits of a tagged deletion file's id below the tag's 40 bits.
_DELETION_RANDOM_BITS = 64 - 4 * WRITE_TAG_LENGTH


def new_deletion_file_id(tag: str = "") -> int:
    """A deletion file id: 64 random bits, or a write ``tag`` (exactly :data:`WRITE_TAG_LENGTH`
    hex digits) in the top bits and random ones below, so that the deletion files of one
    distributed job can be found by name (:func:`has_deletion_tag`)."""
    if not tag:
        return secrets.randbits(64)
    if len(tag) != WRITE_TAG_LENGTH or any(c not in "0123456789abcdef" for c in tag):
        raise ValueError(f"invalid deletion file tag {tag!r}")
    return (int(tag, 16) << _DELETION_RANDOM_BITS) | secrets.randbits(_DELETION_RANDOM_BITS)


def has_deletion_tag(name: str, tag: str) -> bool:
    """Whether a deletion file name (``<fragment>-<read version>-<id>.<ext>``) has an id made by
    :func:`new_deletion_file_id` with ``tag``."""
    parts = name.split(".", 1)[0].split("-")
    if len(parts) != 3 or not parts[2].isdigit() or len(tag) != WRITE_TAG_LENGTH:
        return False
    return int(parts[2]) >> _DELETION_RANDOM_BITS == int(tag, 16)


# A URL scheme (``s3:``, ``file:``) or a drive letter (``C:``) at the start of a path.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


# Longest file name (one segment of a path) and longest relative path a manifest may give: the usual
# file-name limit of local file systems, and S3's key limit (the dataset's own prefix comes on top).
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024
# How much of a refused path a message shows.
_SHOWN_CHARS = 80

# Relative paths of plain segments, none starting with a dot (so no "." or ".." either).
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_\-][A-Za-z0-9_.\-]*)*")


def check_relative_path(path: str, where: str, what: str) -> str:
    """``path`` if it is a plain relative path that stays inside its folder of the dataset.

    Paths read from manifests and transactions (data files, transaction files) are joined to a folder
    of the dataset. Refused: empty paths and segments, ``.`` and ``..`` segments, absolute paths, URL
    schemes and drive letters, backslashes, NUL and other control characters. Nested relative paths
    (``a/b.lance``) are accepted. So are names no file system or object store can hold: a segment
    longer than :data:`MAX_NAME_BYTES` or a path longer than :data:`MAX_PATH_BYTES` (UTF-8).

    Raises:
        CorruptFileError: naming ``where`` (the manifest or transaction the path comes from) and the
            path (shortened when long).
    """
    if len(path) <= MAX_NAME_BYTES and _PLAIN_PATH.fullmatch(path):  # what pylance writes: one regex
        return path
    problem = None
    if not path:
        problem = "is empty"
    elif any(ord(c) < 0x20 for c in path) or "\x7f" in path:
        problem = "contains a control character"
    elif "\\" in path:
        problem = "contains a backslash"
    elif path.startswith("/"):
        problem = "is absolute"
    elif _SCHEME.match(path):
        problem = "starts with a URL scheme or drive letter"
    elif any(seg in ("", ".", "..") for seg in path.split("/")):
        problem = "has an empty, '.' or '..' segment"
    if problem is not None:
        raise CorruptFileError(where, f"{what} {_shown(path)} {problem}: it must stay inside the dataset")
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        problem = f"is {size} bytes long, more than the {MAX_PATH_BYTES} a path may have"
    else:
        longest = max(len(seg.encode("utf-8", "surrogatepass")) for seg in path.split("/"))
        if longest > MAX_NAME_BYTES:
            problem = f"has a name of {longest} bytes, more than the {MAX_NAME_BYTES} a file name may have"
    if problem is not None:
        raise CorruptFileError(where, f"{what} {_shown(path)} {problem}")
    return path


def _shown(path: str) -> str:
    """A path for a message: the whole of it if short, else its start and its length."""
    if len(path) <= _SHOWN_CHARS:
        return repr(path)
    return f"{path[:_SHOWN_CHARS]!r}... ({len(path)} characters)"


def data_file_path(name: str) -> str:
    return f"{DATA_DIR}/{name}"


def deletion_file_path(fragment_id: int, read_version: int, file_id: int, bitmap: bool) -> str:
    return f"{DELETIONS_DIR}/{fragment_id}-{read_version}-{file_id}.{'bin' if bitmap else 'arrow'}"


def transaction_file_name(read_version: int, txn_uuid: str) -> str:
    return f"{read_version}-{txn_uuid}{TRANSACTION_SUFFIX}"


def parse_transaction_name(name: str) -> int | None:
    """The read version in a transaction file's name (``{read_version}-{uuid}.txn``), or None for a
    name of another shape."""
    if not name.endswith(TRANSACTION_SUFFIX):
        return None
    head = name.partition("-")[0]
    return int(head) if head.isdigit() and len(head) < 20 else None


def transaction_path(name: str) -> str:
    return f"{TRANSACTIONS_DIR}/{name}"


ABORTED_WRITE_SUFFIX = ".aborted"


def aborted_write_path(tag: str) -> str:
    """The marker of an aborted distributed write whose data files carry ``tag`` in their names.

    Tasks of that write that are still running check it and delete their own files. It sits with
    the transaction files: pylance ignores the unknown suffix, and cleanup removes it like any
    unreferenced file once the grace period is over.
    """
    return f"{TRANSACTIONS_DIR}/{tag}{ABORTED_WRITE_SUFFIX}"


def tag_path(name: str) -> str:
    return f"{TAGS_DIR}/{name}.json"


def check_tag_name(name: str) -> str:
    """Tag names become file names: letters, digits, ``_ . -``; not starting with ``.`` (as pylance).

    Raises:
        ValueError: the name is not a valid tag name.
    """
    if not isinstance(name, str) or not _TAG_NAME.match(name) or name.endswith(".lock") or ".." in name:
        raise ValueError(f"invalid tag name {name!r}: use letters, digits, '_', '.' and '-'")
    if len(name) > MAX_TAG_NAME_LENGTH:
        raise ValueError(f"tag name of {len(name)} characters is longer than {MAX_TAG_NAME_LENGTH}")
    return name


# Refs lance_table keeps beside pylance's tags (pylance ignores both folders):
# - a pin keeps one version's manifest and files alive while an operation (a restore) reads it;
# - a lock serializes the writers of one tag (update and delete must not race).
PINS_DIR = "_refs/pins"
LOCKS_DIR = "_refs/locks"


def pin_path(pin_id: str) -> str:
    return f"{PINS_DIR}/{pin_id}.json"


def tag_lock_path(name: str) -> str:
    return f"{LOCKS_DIR}/tag-{name}.lock"
