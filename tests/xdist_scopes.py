"""How the suite is shared out between pytest-xdist workers (``pytest -n 2``): see the
``pytest_xdist_make_scheduler`` hook in ``conftest.py``."""

from __future__ import annotations

import collections

#: The scopes that take longest (measured: the Spark tests, the fuzz and race tests), handed to the
#: pytest-xdist workers first, so that a run does not end with one worker alone on one of them.
#: The others follow, the scopes of more tests first.
LONGEST_FIRST = (
    "tests/spark/",
    "tests/table/test_fuzz_metadata.py",
    "tests/file/test_fuzz_legacy.py",
    "tests/file/test_fuzz.py",
    "tests/table/test_fuzz_filters_mixed.py",
    "tests/table/test_fuzz_blobs.py",
    "tests/table/test_races.py",
    "tests/table/test_cleanup_races.py",
    "tests/table/test_churn.py",
    "tests/table/test_interop_matrix.py",
    "tests/file/test_v2x_golden.py",
    "tests/file/test_fsst_pairs.py",
    "tests/table/test_fuzz_delete_scans.py",
    "tests/file/test_reader_cycles.py",
)


class LongestFirst(collections.OrderedDict):  # type: ignore[type-arg]
    """The scheduler's queue of scopes: ``popitem(last=False)`` gives the ``LONGEST_FIRST`` ones first."""

    def popitem(self, last: bool = True) -> tuple[object, object]:
        for scope in LONGEST_FIRST:
            if scope in self:
                return scope, self.pop(scope)
        return super().popitem(last)
