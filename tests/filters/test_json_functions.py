"""pylance's JSON functions in filters and column expressions: the same query on one dataset gives
the same rows (and values) with both libraries."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.interop

_ROWS = [
    {
        "user": {"name": "Alice", "age": 30, "profile": {"settings": {"theme": "dark"}}},
        "tags": ["python", "ml"],
        "name": "Alice",
        "age": 30,
        "active": True,
        "score": 95.5,
        "counts": [1, 2, 3, 4, 5],
    },
    {"user": {"name": "Bob", "age": 25}, "tags": ["rust", "db"], "name": "Bob", "age": 25, "active": False},
    {
        "user": {"name": "Charlie"},
        "tags": [],
        "name": "Charlie",
        "age": "35",
        "active": "true",
        "score": "92",
    },
    None,
    {"name": "David", "counts": []},
]

_FILTERS = [
    "json_extract(data, '$.user.name') = '\"Alice\"'",
    "json_extract(data, '$.tags[1]') = '\"ml\"'",
    "json_exists(data, '$.user.age')",
    "json_exists(data, '$.tags[0]')",
    "json_array_contains(data, '$.tags', 'python')",
    "json_array_length(data, '$.counts') > 3",
    "json_array_length(data, '$.counts') = 0",
    "json_get(data, 'user') IS NOT NULL",
    "json_get_string(data, 'name') = 'Alice'",
    "json_get_string(data, 'age') = '30'",
    "json_get_int(data, 'age') > 28",
    "json_get_bool(data, 'active') = true",
    "json_get_float(data, 'score') > 90",
    "json_get_string(json_get(json_get(json_get(data, 'user'), 'profile'), 'settings'), 'theme') = 'dark'",
    "json_get_int(json_get(data, 'counts'), '1') = 2",
]


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("json") / "ds"
    data = [json.dumps(r) if r is not None else None for r in _ROWS]
    table = pa.table({"id": range(len(_ROWS)), "data": pa.array(data, pa.json_())})
    lance.write_dataset(table, path, max_rows_per_file=2)  # several fragments: read as one batch
    return path


@pytest.mark.parametrize("sql", _FILTERS)
def test_filters_match_pylance(uri: Path, sql: str) -> None:
    ours = lt.dataset(uri).to_table(filter=sql)["id"].to_pylist()
    assert ours == lance.dataset(uri).to_table(filter=sql)["id"].to_pylist()


def test_values_match_pylance(uri: Path) -> None:
    columns = {
        "user": "json_get(data, 'user')",
        "user_text": "json_extract(data, '$.user')",
        "age": "json_get_int(data, 'age')",
        "score": "json_get_float(data, 'score')",
        "n": "json_array_length(data, '$.tags')",
    }
    ours, theirs = lt.dataset(uri).to_table(columns=columns), lance.dataset(uri).to_table(columns=columns)
    assert ours.equals(theirs)


def test_json_text_in_a_string_column_and_bad_calls(tmp_path: Path) -> None:
    lt.write_dataset(pa.table({"s": ['{"a": {"b": 1}}', "not json", None]}), tmp_path)
    ds = lt.dataset(tmp_path)
    assert ds.to_table(columns={"b": "json_get_int(json_get(s, 'a'), 'b')"})["b"].to_pylist() == [
        1,
        None,
        None,
    ]
    for bad in (
        "json_get(s)",
        "json_get(s, s)",
        "json_exists(s, 'a.b')",
        "json_extract(s, '$.*')",
        "json_get(1, 'a')",
    ):
        with pytest.raises(lt.FilterError):
            ds.to_table(filter=f"{bad} IS NULL")
