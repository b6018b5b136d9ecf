"""The one retry loop for operations that re-run whole after a retryable conflict (pylance's
``conflict_retries`` and ``retry_timeout``): the commit path rebases what it can; what it cannot
(an update whose fragments another update rewrote) is planned again on the latest version, as is
an attempt that found a file of its version gone because cleanup removed that version meanwhile."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from lance_table.errors import CommitConflictError, DataFileNotFoundError

if TYPE_CHECKING:
    from lance_table.table.snapshot import Snapshot

R = TypeVar("R")

# pylance's defaults for the operations that retry after a lost race (``update``, ``delete``):
# whole-operation retries, and their time bound.
DEFAULT_CONFLICT_RETRIES: int = 10
DEFAULT_RETRY_TIMEOUT: dt.timedelta = dt.timedelta(seconds=30)


def retry_on_conflict(
    ds: Snapshot,
    attempt: Callable[[Snapshot], R],
    conflict_retries: int,
    retry_timeout: dt.timedelta,
    *,
    conflicts: bool = True,
) -> R:
    """``attempt(ds)``; after a retryable :class:`CommitConflictError`, ``attempt`` again on the
    latest version, up to ``conflict_retries`` more times and while ``retry_timeout`` has not
    passed since the start (the first attempt always runs). A file missing because cleanup removed
    the version being read (:attr:`DataFileNotFoundError.cleaned_up`: nothing of the attempt was
    committed, and the latest version no longer names that file) is retried the same way.
    ``conflicts=False`` retries only the latter (an operation that reports its conflicts).

    Raises:
        CommitConflictError: a conflict that is not retryable, or the last one once the retries or
            the time run out.
        DataFileNotFoundError: a file is missing for another reason, or the retries ran out.
    """
    deadline = time.monotonic() + retry_timeout.total_seconds()
    current = ds
    for tries in range(conflict_retries + 1):
        try:
            return attempt(current)
        except CommitConflictError as exc:
            out_of_tries = tries == conflict_retries or time.monotonic() >= deadline
            if not conflicts or not exc.retryable or out_of_tries:
                raise
        except DataFileNotFoundError as exc:
            if not exc.cleaned_up or tries == conflict_retries or time.monotonic() >= deadline:
                raise
        current = current.checkout()
    raise AssertionError("unreachable")  # pragma: no cover
