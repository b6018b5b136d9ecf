"""The ``lance-table`` command line: inspect, read and maintain Lance datasets from a shell.

Its libraries (click, rich) come with the ``cli`` extra (``pip install 'lance_table[cli]'``) and are
imported only here, never by ``import lance_table``. Commands live in one module per group:
:mod:`.describe` (info, versions, tags), :mod:`.read` (head, scan, inspect), :mod:`.maintain`
(compact, cleanup, restore, verify); :mod:`.app` puts them together.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: The libraries the command line needs, as the ``cli`` extra installs them.
DEPENDENCIES = ("click", "rich")
#: Exit codes: a library error, bad usage or a missing extra, problems found by ``verify``.
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PROBLEMS = 3


def missing_dependencies() -> list[str]:
    """The libraries of :data:`DEPENDENCIES` that cannot be imported."""
    missing = []
    for name in DEPENDENCIES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lance-table`` with ``argv`` (default: the process's arguments); returns the exit code.

    Without the ``cli`` extra's libraries it says which extra to install and returns
    :data:`EXIT_USAGE` instead of failing with a traceback.
    """
    missing = missing_dependencies()
    if missing:
        sys.stderr.write(
            f"lance-table needs {' and '.join(missing)}, from the 'cli' extra: "
            "pip install 'lance_table[cli]'\n"
        )
        return EXIT_USAGE
    from lance_table.cli.app import run

    return run(argv)


__all__ = ["DEPENDENCIES", "EXIT_ERROR", "EXIT_PROBLEMS", "EXIT_USAGE", "main", "missing_dependencies"]
