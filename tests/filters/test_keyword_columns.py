"""Filters on columns named like SQL commands (``set``, ``show``, ``use``, ``load``...) are
conditions, as they are to pylance, not statements."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt

NAMES = [
    "set",
    "show",
    "use",
    "load",
    "unset",
    "describe",
    "grant",
    "call",
    "explain",
    "comment",
    "fetch",
    "rename",
]


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("kw") / "ds")
    lance.write_dataset(pa.table({n: pa.array([1, 2, None]) for n in NAMES}), path)
    return path


@pytest.mark.parametrize("name", NAMES)
def test_a_command_word_names_a_column(uri: str, name: str) -> None:
    for flt in [f"{name} = 1", f"{name} IS NULL", f"{name} > 1 AND {name} < 3"]:
        assert lt.dataset(uri).to_table(filter=flt).equals(lance.dataset(uri).to_table(filter=flt)), flt


def test_two_statements_are_still_refused(uri: str) -> None:
    with pytest.raises(lt.errors.FilterError, match="single expression"):
        lt.dataset(uri).to_table(filter="set = 1; show = 2")
    assert Path(uri).exists()
