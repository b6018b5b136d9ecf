"""The pytest-xdist scheduling of the suite (tests/xdist_scopes.py) names scopes that exist."""

from __future__ import annotations

from pathlib import Path

from xdist_scopes import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_the_longest_scopes_are_modules_or_folders_of_the_suite() -> None:
    for scope in LONGEST_FIRST:
        path = ROOT / scope
        assert path.is_dir() if scope.endswith("/") else path.is_file(), scope
