"""Tags as pylance has them: ``Tags.replace_metadata`` and ``Tag`` as a plain dict."""

from __future__ import annotations

import json
import pickle

import pyarrow as pa
import pytest

import lance_table as lt

lance = pytest.importorskip("lance")


def test_replace_metadata_as_pylance(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"a": [1]}), uri)
    lt.dataset(uri).tags.create("t", 1)
    before = json.loads((tmp_path / "ds/_refs/tags/t.json").read_text())
    lt.dataset(uri).tags.replace_metadata("t", {"k": "v"})
    after = json.loads((tmp_path / "ds/_refs/tags/t.json").read_text())
    assert after == {**before, "metadata": {"k": "v"}}
    assert lance.dataset(uri).tags.list()["t"] == lt.dataset(uri).tags.list()["t"]
    lance.dataset(uri).tags.replace_metadata("t", {"x": "y"})
    assert lt.dataset(uri).tags.list()["t"].metadata == {"x": "y"}
    tags = lt.dataset(uri).tags
    for args, exc in (
        (("nope", {"a": "b"}), ValueError),
        (("t", {"a": 1}), TypeError),
        (("t", ["x"]), TypeError),
    ):
        with pytest.raises(exc):
            tags.replace_metadata(*args)


def test_tag_is_a_plain_dict_as_pylances(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"a": [1]}), uri)
    lt.dataset(uri).tags.create("t", 1)
    tag, theirs = lt.dataset(uri).tags.list()["t"], lance.dataset(uri).tags.list()["t"]
    assert isinstance(tag, dict) and tag == theirs and tag.copy() == theirs.copy()
    assert pickle.loads(pickle.dumps(tag)) == tag and pickle.loads(pickle.dumps(tag)).name == "t"
    for d in (tag, theirs):
        d.update(version=9)
        assert d.pop("manifest_size") > 0 and d.setdefault("extra", 1) == 1
    assert tag == theirs and tag.version == 9
    assert lt.dataset(uri).tags.list()["t"].version == 1  # the tag itself is untouched
    tag.clear()
    assert tag == {} and dict.fromkeys(["a"]) == lt.Tag.fromkeys(["a"])
