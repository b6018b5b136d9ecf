"""Assertions shared by the tests."""

from __future__ import annotations

import pyarrow as pa


def _decode_dictionaries(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(arr.type):
        return arr.cast(arr.type.value_type)
    return arr


def assert_tables_equal(actual: pa.Table, expected: pa.Table, *, check_metadata: bool = True) -> None:
    """Full-content equality; dictionary columns compare by their decoded values.

    (Lance stores a null dictionary index as an index to a null item, so the dictionaries may differ
    while the values are the same.)
    """
    assert actual.schema.names == expected.schema.names
    assert actual.num_rows == expected.num_rows, (actual.num_rows, expected.num_rows)
    for name in expected.column_names:
        a, e = actual[name], expected[name]
        assert a.type == e.type, f"{name}: type {a.type} != {e.type}"
        a2, e2 = _decode_dictionaries(a), _decode_dictionaries(e)
        if not a2.equals(e2):
            for i in range(len(e2)):
                if not a2[i].equals(e2[i]):
                    raise AssertionError(f"column {name} differs first at row {i}: {a2[i]} != {e2[i]}")
            raise AssertionError(f"column {name} differs")
    if check_metadata:
        assert actual.schema.equals(expected.schema, check_metadata=True), (actual.schema, expected.schema)
