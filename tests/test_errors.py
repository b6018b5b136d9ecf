"""Every error pickles whole (message, type and attributes): errors cross process boundaries in
multiprocessing pools and Spark tasks, where an error that cannot be rebuilt hangs the pool."""

from __future__ import annotations

import inspect
import pickle

import pytest

import lance_table.errors as errors

ARGS = {
    errors.CorruptFileError: (("data/a.lance", "bad magic"), {"offset": 3}),
    errors.UnsupportedFormatError: (("encoding X",), {"path": "data/a.lance"}),
    errors.BlobLocationError: (("http://h/x", "not below a base"), {"path": "data/a.lance"}),
    errors.StorageOptionsError: (("timeoutt", "is unknown"), {"known": ("timeout",)}),
    errors.StorageUnreachableError: (("s3://b/x", "connection refused"), {}),
    errors.StorageCredentialsError: (("s3://b/x", "no credentials"), {}),
    errors.InvalidURIError: (("file://h/x", "names the host 'h'"), {}),
    errors.CommitConflictError: (("lost the race",), {"retryable": True}),
    errors.DataFileNotFoundError: (("data/a.lance", 3), {"cleaned_up": True}),
    errors.ColumnNotFoundError: (("nmae", ("id", "name")), {"parent": "s"}),
    errors.UnsupportedOptionError: (("write_dataset", "table_id"), {}),
    errors.FieldNotFoundError: (("s.y", ("id", "s", "s.x")), {}),
}
CLASSES = [c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, errors.LanceTableError)]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_errors_pickle_whole(cls):
    args, kwargs = ARGS.get(cls, (("something went wrong",), {}))
    error = cls(*args, **kwargs)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls
    assert str(back) == str(error) and back.args == error.args
    assert vars(back) == vars(error)
