"""Errors that pylance's users match by their words: the same call on both libraries raises an
error of the same built-in class whose message holds the same phrase."""

from __future__ import annotations

import contextlib
from pathlib import Path

import lance
import lance.file
import pyarrow as pa
import pytest

import lance_table as lt
import lance_table.file

pytestmark = pytest.mark.interop


def _both(tmp_path: Path, call, error: type[BaseException], phrase: str) -> None:
    """``call(lib, uri)`` raises ``error`` whose message holds ``phrase``, for both libraries."""
    for lib in (lance, lt):
        uri = tmp_path / lib.__name__
        if not uri.exists():
            lance.write_dataset(
                pa.table({"str": ["a", "b"], "int": [1, 2], "x": pa.array([1, 1024], pa.int32())}), uri
            )
        with pytest.raises(error, match=phrase):
            call(lib, uri)


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda lib, u: lib.dataset(u).to_table(offset=-1), ValueError, "Offset must be non-negative"),
        (lambda lib, u: lib.dataset(u).to_table(limit=-1), ValueError, "Limit must be non-negative"),
        (lambda lib, u: lib.dataset(u).to_table(filter="str > 10"), ValueError, "Invalid user input: "),
        (lambda lib, u: lib.dataset(u).to_table(filter="foo = 7"), ValueError, "No field named foo"),
        (lambda lib, u: lib.dataset(u).to_table(filter="int"), ValueError, "does not return a boolean"),
        (
            lambda lib, u: lib.dataset(u).alter_columns({"path": "x", "data_type": pa.int8()}),
            Exception,
            "Can't cast value 1024 to type Int8",
        ),
        (
            lambda lib, u: lib.dataset(u).add_columns(
                iter([pa.record_batch([pa.array([1])], ["f"])]), reader_schema=pa.schema([("f", pa.int64())])
            ),
            OSError,
            "Stream ended before producing values for all rows in dataset",
        ),
        (
            lambda lib, u: lib.dataset(u).add_columns(
                iter([pa.record_batch([pa.array([1, 2, 3])], ["f"])]),
                reader_schema=pa.schema([("f", pa.int64())]),
            ),
            OSError,
            "Stream produced more values than expected for dataset",
        ),
    ],
    ids=["offset", "limit", "bad-literal", "no-field", "not-boolean", "cast", "rows-short", "rows-long"],
)
def test_messages_match_pylances(tmp_path: Path, call, error, phrase: str) -> None:
    _both(tmp_path, call, error, phrase)


def test_file_writer_without_schema_or_data(tmp_path: Path) -> None:
    for i, module in enumerate((lance.file, lance_table.file)):
        writer = module.LanceFileWriter(str(tmp_path / f"{i}.lance"))
        with pytest.raises(ValueError, match="Schema is unknown and file cannot be created"):
            writer.close()


def test_a_bare_conflict_from_a_commit_lock_names_itself(tmp_path: Path) -> None:
    @contextlib.contextmanager
    def lock(version: int):
        raise lt.commit.CommitConflictError()
        yield

    with pytest.raises(lt.CommitConflictError, match="CommitConflictError"):
        lt.write_dataset(pa.table({"a": [1]}), tmp_path, commit_lock=lock)
    assert not (tmp_path / "_versions").exists() or not any((tmp_path / "_versions").iterdir())


@pytest.mark.parametrize(("column", "target"), [("x", pa.string()), ("f", pa.int32()), ("b", pa.float32())])
def test_an_impossible_cast_names_the_types_as_pylance(
    tmp_path: Path, column: str, target: pa.DataType
) -> None:
    table = pa.table({"x": pa.array([1], pa.int32()), "f": [1.5], "b": [True]})
    messages = []
    for lib in (lance, lt):
        lib.write_dataset(table, tmp_path / lib.__name__)
        with pytest.raises(OSError) as info:
            lib.dataset(tmp_path / lib.__name__).alter_columns({"path": column, "data_type": target})
        messages.append(str(info.value))
    phrase = messages[1]
    assert phrase.startswith(f'Cannot cast column "{column}" from ') and phrase in messages[0]
