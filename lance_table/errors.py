"""The one error tree of lance_table.

Every error a caller can see derives from :class:`LanceTableError`, and where a built-in exception
fits, also from that built-in, so ``except ValueError`` and ``except FileNotFoundError`` keep working.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import pyarrow as pa


class LanceTableError(Exception):
    """Base class of every error raised by lance_table.

    Errors pickle with the arguments they were made with, so that they cross process boundaries
    (multiprocessing pools, Spark tasks) whole, attributes included.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_remake, (type(self), self.args), self.__dict__)


def _remake(cls: type[LanceTableError], args: tuple[Any, ...]) -> LanceTableError:
    """An error with these ``args`` (its message), without running ``__init__`` again: the pickled
    attributes are set afterwards."""
    base: Any = OSError if issubclass(cls, OSError) else Exception  # the base whose layout it has
    error = base.__new__(cls, *args)
    error.args = args
    return error


class CorruptFileError(LanceTableError, ValueError):
    """A file's bytes do not follow the format: bad magic, truncation, offsets out of range, ...

    Attributes:
        path: the file that is damaged (may be ``"<memory>"`` for anonymous sources).
        offset: the byte offset where the problem was found, when known.
    """

    def __init__(self, path: str, problem: str, *, offset: int | None = None) -> None:
        self.path = path
        self.problem = problem
        self.offset = offset
        where = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"{path}: {problem}{where}")


class UnsupportedFormatError(LanceTableError, NotImplementedError):
    """The data is valid Lance but uses a version, encoding or type this library cannot handle."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class PackedStructError(UnsupportedFormatError, ValueError, OSError):
    """A packed struct (``lance-encoding:packed``) that pylance would not store either: variable-width
    children in a file format before 2.2, a child of a kind that cannot be packed, or a null inside
    a child. Also a ValueError and an OSError, which pylance's file writer and ``write_dataset``
    raise for these."""


class BlobLocationError(LanceTableError, PermissionError):
    """An external blob's URI names a location lance_table refuses to open: outside the dataset's
    registered base paths, with a scheme it does not know, or escaping its base.

    Attributes:
        uri: the URI as the blob descriptor stores it.
        reason: why it is refused.
        path: the data file holding the descriptor, when known.
    """

    def __init__(self, uri: str, reason: str, *, path: str | None = None) -> None:
        self.uri = uri
        self.reason = reason
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}external blob {uri!r} is refused: {reason}")


class SchemaError(LanceTableError, ValueError):
    """A schema cannot be stored, or data does not match the schema it is written with."""


class AppendSchemaError(SchemaError, OSError):
    """Rows appended do not fit the dataset's schema (a field it lacks, a non-nullable field
    missing, another type). Also an ``OSError``, as pylance raises it."""


class EmptyDataError(LanceTableError, ValueError, OSError):
    """A write that must make a file was given no rows (``LanceFragment.create``). A
    ``ValueError``, and an ``OSError`` as pylance raises it."""


class MixedFileVersionsError(LanceTableError, OSError):
    """A dataset whose manifest records the legacy format 0.1 holds data files of several formats
    (written by pylance 0.16, which could record the wrong format): it reads, but a commit cannot
    say which format the dataset has. Restore a version from before the mixture. An ``OSError``,
    as pylance raises it."""


class SchemaChangeError(LanceTableError, OSError):
    """A schema change (``add_columns``, ``alter_columns``, ``merge``) cannot be made as asked: a
    column already exists or does not exist, a cast is not allowed, a value does not fit. An
    ``OSError``, as pylance raises it."""


class InputTypeError(LanceTableError, TypeError):
    """Data handed to a write is of no kind it takes (also a TypeError, as pylance raises)."""


class LanceFileNotFoundError(LanceTableError, FileNotFoundError, ValueError):
    """A Lance file to read does not exist (also a ValueError, which pylance's file reader raises)."""


class RowRangeError(LanceTableError, IndexError, ValueError):
    """Rows asked of a file that it does not have (also a ValueError, as pylance raises)."""


class FilterError(LanceTableError, ValueError):
    """A filter predicate cannot be parsed or uses a construct this library does not support.

    The message starts as pylance's does (``Invalid user input: ``), which its users match on.
    """

    PREFIX = "Invalid user input: "

    def __init__(self, message: str = "", *args: Any) -> None:
        if not message.startswith(self.PREFIX):
            message = self.PREFIX + message
        super().__init__(message, *args)


class FilterEvaluationError(LanceTableError, ValueError, OSError):
    """A delete's predicate parsed but failed on the rows (``x % 0``: a division by zero). Also an
    OSError, as pylance's delete raises one; the message starts as pylance's does."""

    PREFIX = "Query Execution error: Error applying filter expression to batch: "


class UpdateEvaluationError(LanceTableError, pa.ArrowInvalid, OSError):
    """An update's value or condition parsed but failed on the rows (``x % 0``: a division by
    zero). An OSError, as pylance's update raises, and still pyarrow's ``ArrowInvalid``."""


class ScanOptionError(LanceTableError, ValueError):
    """A scan option has a bad value (a negative limit, a batch size below 1) or asks what a scan
    cannot answer (a count with a limit), as pylance's ``ValueError`` says."""


class ColumnNotFoundError(FilterError):
    """An expression names a column (or a struct field) the schema does not have.

    The message lists the columns there are and suggests the nearest one. Attributes:
        name: the name as written.
        columns: the top-level columns (or, for a struct field, the struct's fields) there are.
        parent: the struct column whose field is missing; None for a top-level column.
        suggestion: the nearest existing name, when one is close.
    """

    def __init__(self, name: str, columns: Sequence[str], *, parent: str | None = None) -> None:
        self.name = name
        self.columns = tuple(columns)
        self.parent = parent
        folded = {c.casefold(): c for c in reversed(self.columns)}
        close = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.6)
        self.suggestion = folded[close[0]] if close else None
        # (top level: pylance's words, "No field named x", which its users match on)
        what = f"unknown field '{name}' in struct column '{parent}'" if parent else f"No field named {name}"
        hint = f"; did you mean '{self.suggestion}'?" if self.suggestion else ""
        listed = ", ".join(self.columns[:50]) + (", ..." if len(self.columns) > 50 else "")
        kind = "its fields" if parent else "the columns"
        super().__init__(f"{what}{hint} ({kind}: {listed})")


class StorageOptionsError(LanceTableError, ValueError):
    """A storage option is unknown, unsafe for the storage layer, given twice, or has a bad value.

    The message names the option (never its value when that could be a secret) and, for an unknown
    name, lists the known ones. Attributes:
        option: the option's name as given.
        known: the names accepted for this kind of storage (empty when not relevant).
    """

    def __init__(self, option: str, problem: str, *, known: tuple[str, ...] = ()) -> None:
        self.option = option
        self.known = known
        message = f"storage option {option!r} {problem}"
        if known:
            message += f"; known options: {', '.join(known)}"
        super().__init__(message)


class InvalidURIError(LanceTableError, ValueError):
    """A dataset URI names no place lance_table can reach (a ``file:`` URI of another host, or one
    without an absolute path). Attribute ``uri``: the URI as given."""

    def __init__(self, uri: str, problem: str) -> None:
        self.uri = uri
        super().__init__(f"{uri!r} {problem}")


class StorageUnreachableError(LanceTableError, ConnectionError):
    """The storage service could not be reached (connection refused, DNS failure, timeout).

    Attributes ``uri`` (the dataset) and ``detail`` (what the client reported). Check the
    endpoint (``aws_endpoint``), the network, and the ``connect_timeout``/``timeout`` options."""

    def __init__(self, uri: str, detail: str) -> None:
        self.uri = uri
        self.detail = detail
        super().__init__(f"cannot reach the storage of {uri}: {detail}")


class StorageCredentialsError(LanceTableError, PermissionError):
    """The storage refused access: no credentials were found, or the ones given are invalid or
    lack permission. Attributes ``uri`` and ``detail``."""

    def __init__(self, uri: str, detail: str) -> None:
        self.uri = uri
        self.detail = detail
        super().__init__(f"access to the storage of {uri} failed: {detail}")


class DatasetNotFoundError(LanceTableError, FileNotFoundError, ValueError):
    """No dataset (no manifest) exists at the given URI (pylance raises ValueError there)."""


class DatasetAlreadyExistsError(LanceTableError, FileExistsError):
    """``mode="create"`` was asked for where a dataset already exists."""


class VersionNotFoundError(LanceTableError, LookupError, ValueError, OSError):
    """The requested version, tag or timestamp does not resolve to a version of the dataset
    (pylance raises ValueError when opening such a version, OSError when checking it out)."""


class VersionGoneError(VersionNotFoundError, FileNotFoundError):
    """A version's manifest was listed but removed before it could be read (a cleanup ran meanwhile)."""


class BasePathError(LanceTableError, ValueError, OSError):
    """A base path (pylance's ``DatasetBasePath``) is wrong: a ``target_bases`` reference that names
    no registered base, a new base whose name, path or id collides with a registered one, bases
    given where they cannot be registered, or a file naming a base id the manifest does not
    register. pylance raises ValueError (``add_bases``) or OSError (writes) for these.

    Attributes:
        reference: the base name, path or id that is wrong.
    """

    def __init__(self, message: str, *, reference: str | None = None) -> None:
        self.reference = reference
        super().__init__(message)


class TagError(LanceTableError, ValueError):
    """A tag cannot be created, updated or deleted (exists already, missing, bad name)."""


class BranchError(LanceTableError, ValueError, OSError):
    """A branch cannot be created, checked out or deleted (bad or reserved name, exists already,
    missing): pylance raises OSError for a bad name and ValueError for a missing branch."""


class UnsupportedOperationError(LanceTableError, NotImplementedError):
    """An operation pylance has (a ``LanceOperation`` kind, an option) that lance_table does not
    perform; the message names it. Nothing was written."""


class BinaryCopyError(UnsupportedOperationError, OSError):
    """A compaction with ``compaction_mode="force_binary_copy"`` met fragments it cannot copy page
    by page (deletions, other schemas or file versions, blob columns); the message says why.
    pylance raises OSError. Nothing was committed, and the files written were deleted."""


class UnsupportedOptionError(UnsupportedOperationError, ValueError):
    """A pylance option that would change the result and that lance_table does not implement.

    Attributes:
        option: the option's name.
    """

    def __init__(self, call: str, option: str, why: str = "") -> None:
        self.option = option
        message = f"{call}({option}=...) is not supported by lance_table"
        super().__init__(message + (f": {why}" if why else ""))


class CommitError(LanceTableError):
    """A commit failed: no safe way to commit, retries exhausted, or the store failed mid-commit.

    ``except CommitError`` catches every commit failure, conflicts and unknown outcomes included.
    """


class CommitConflictError(CommitError, OSError):
    """A commit lost against concurrent commits it cannot be rebased onto.

    Attributes:
        retryable: True when re-running the whole operation against the new latest version makes
            sense (e.g. compaction raced a delete); False when the other commit replaced the data
            this one was based on (an overwrite or restore), or the versions to rebase over are gone.
    """

    def __init__(self, message: str = "", retryable: bool = True) -> None:
        self.retryable = retryable
        # raised bare (by a commit lock, as pylance's tests do): the message still names the error
        super().__init__(message or "CommitConflictError: a concurrent commit conflicts with this one")


class DetachedCommitError(CommitError, OSError):
    """A detached commit the dataset cannot take (it has V1 manifest names, or does not exist yet),
    or an attached commit on top of a detached version (pylance raises OSError). Nothing was written."""


class CommitStateUnknownError(CommitError):
    """Writing the manifest failed in a way that leaves its outcome unknown (a timeout, a broken
    connection): the version may exist. Files written for the commit are left in place; cleanup
    removes them later if the version did not land.
    """


class WriteAbortedError(LanceTableError, RuntimeError):
    """A task of a distributed write found the write aborted; its files were deleted.

    Raised in tasks that outlive the failure of their job (Spark does not wait for them before
    it aborts the write).
    """


class DataFileNotFoundError(LanceTableError, FileNotFoundError):
    """A file a version's manifest names (a data file or a deletion file) does not exist.

    Typically the version was cleaned up (``cleanup_old_versions``) while a handle pinned to it was
    still reading. Attributes:
        path: the missing file.
        version: the version whose manifest names it, when known.
        cleaned_up: True when that version's manifest no longer exists either.
    """

    def __init__(self, path: str, version: int | None, *, cleaned_up: bool = False) -> None:
        self.path = path
        self.version = version
        self.cleaned_up = cleaned_up
        which = f"version {version}" if version is not None else "the manifest"
        message = f"{path}: file named by {which} does not exist"
        if cleaned_up:
            message += f" (version {version} has been cleaned up: its manifest no longer exists)"
        super().__init__(message)


class BatchCommitError(LanceTableError, ValueError, OSError):
    """``commit_batch`` was given what it cannot merge into one commit: no transactions, or one
    other than an Append (pylance merges only appends). An ``OSError`` as pylance's is; nothing
    was written."""


class FragmentMetadataError(LanceTableError, ValueError, OSError):
    """Fragment metadata handed to a commit that pylance refuses too: a data file with as many
    column indices as field ids, or a leaf field of a 2.1+ file without a column. An ``OSError``
    as pylance's is; nothing was written."""


class UpdateError(LanceTableError, ValueError):
    """An ``update`` asks for what cannot be done: no columns, a nested field or a blob column to
    update, a negative retry count (a ValueError, as pylance raises). Nothing was written."""


class FieldNotFoundError(SchemaError, OSError):
    """A field path (``"a"``, ``"s.x"``) names no field of the dataset's schema; the message lists the
    fields there are. Also an ``OSError``, as pylance's metadata updates raise it.

    Attributes:
        path: the path as given.
        fields: the paths of the fields there are.
    """

    def __init__(self, path: str, fields: Sequence[str]) -> None:
        self.path = path
        self.fields = tuple(fields)
        listed = ", ".join(self.fields[:50]) + (", ..." if len(self.fields) > 50 else "")
        super().__init__(f"field {path!r} not found; the fields are: {listed}")


class MergeInsertError(LanceTableError, ValueError):
    """A ``merge_insert`` is set up wrongly: no join keys, a key column the dataset lacks, no
    clause that changes data, or a bad option value (a ValueError, as pylance raises)."""


class MergeSourceError(LanceTableError, OSError):
    """The source data of a ``merge_insert`` cannot be merged: several source rows match the same
    target row (ambiguous), a row matched under ``when_matched_fail``, or the source's columns do
    not fit the dataset's (an OSError, as pylance raises)."""


class BlobValueError(LanceTableError, ValueError):
    """A blob value, blob field option or blob read request is invalid: a ``Blob`` with both bytes
    and a URI, a negative threshold, a range past the end of a blob (a ValueError, as pylance
    raises)."""


class BlobOverflowError(BlobValueError, OverflowError):
    """A blob field threshold too large for pylance's ``usize`` (also an OverflowError, as pylance
    raises)."""


class RowIdOverflowError(LanceTableError, OverflowError):
    """A row id or row address that is not an unsigned 64-bit integer (an OverflowError, as
    pylance raises)."""
