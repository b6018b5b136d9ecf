"""Every public name of pylance's ``lance`` module and of its dataset-facing classes is in
lance_table too (``import lance_table as lance`` is a drop-in), apart from the listed areas that
are out of lance_table's scope (indices, full-text search, the LSM/MemWAL writer, sharding,
DataFusion's FFI, the Rust module itself); and the small modules this brings (``lance.log``,
``lance.io``, ``ScanStatistics``, ``sanitize_ts``) behave as pylance's."""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import inspect
import logging
import os
import subprocess
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt

# pylance's names out of lance_table's scope, and why.
OUT_OF_SCOPE = {
    # indices and search
    "Index",
    "IndexFile",
    "IndexProgress",
    "FtsToken",
    "tokenize",
    "bitmap",
    "indices",
    "query",
    # the LSM / MemWAL writer and sharding
    "CompactedSsTable",
    "LsmPointLookupPlanner",
    "LsmScanner",
    "LsmVectorSearchPlanner",
    "ShardSnapshot",
    "ShardWriter",
    "ShardingField",
    "ShardingSpec",
    "evaluate_sharding_spec",
    "mem_wal",
    # DataFusion's FFI and the Rust engine
    "ExecutionPlan",
    "FFILanceTableProvider",
    "lance",
    "simd_info",
    # modules pylance imports for itself, not API: typing names, its dependency shims
    "Any",
    "Dict",
    "List",
    "Optional",
    "TYPE_CHECKING",
    "Union",
    "dependencies",
    "types",
    "logging",
    "os",
    "warnings",
}
# Dataset members out of scope (indices, MemWAL).
DATASET_OUT_OF_SCOPE = {
    "centroids",
    "commit_existing_index_segments",
    "create_index_uncommitted",
    "get_ivf_model",
    "initialize_mem_wal",
    "mem_wal_index_details",
    "mem_wal_writer",
    "merge_existing_index_segments",
    "merge_index_metadata",
    "prewarm_index",
}
# Names still missing (see docs/index.md); this list only shrinks.
NOT_YET: set[str] = set()
DATASET_NOT_YET: set[str] = set()


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_every_pylance_name_in_scope_is_exported() -> None:
    missing = _public(lance) - _public(lt) - OUT_OF_SCOPE
    # (a submodule is an attribute once something imported it: lance.arrow after a test used it)
    missing = {n for n in missing if importlib.util.find_spec(f"lance_table.{n}") is None}
    assert missing == NOT_YET


@pytest.mark.parametrize(
    "name",
    [
        "LanceFragment",
        "LanceScanner",
        "FragmentMetadata",
        "LanceOperation",
        "Transaction",
        "MergeInsertBuilder",
    ],
)
def test_every_member_of_pylance_classes_exists(name: str) -> None:
    assert _public(getattr(lance, name)) - _public(getattr(lt, name)) == set()


def test_every_dataset_member_in_scope_exists() -> None:
    missing = _public(lance.LanceDataset) - _public(lt.LanceDataset) - DATASET_OUT_OF_SCOPE
    assert missing == DATASET_NOT_YET


@pytest.mark.parametrize("module", ["io", "log", "progress", "util", "fragment", "commit", "optimize"])
def test_pylance_submodules_are_attributes(module: str) -> None:
    assert getattr(lt, module).__name__ == f"lance_table.{module}"


def _stats_of(module, uri: str) -> dict[str, list]:
    ds = module.dataset(uri)
    seen: dict[str, list] = {}
    for how in ("to_table", "reader", "batches", "count_rows", "limit"):
        got: list = []
        if how == "to_table":
            ds.scanner(filter="a > 10", scan_stats_callback=got.append).to_table()
        elif how == "reader":
            reader = ds.scanner(scan_stats_callback=got.append).to_reader()
            seen["before_read"] = list(got)
            reader.read_all()
        elif how == "batches":
            list(ds.scanner(columns=["s"], scan_stats_callback=got.append).to_batches())
        elif how == "count_rows":
            ds.scanner(scan_stats_callback=got.append).count_rows()
        else:
            ds.scanner(limit=3, scan_stats_callback=got.append).to_table()
        seen[how] = got
    return seen


def test_scan_stats_callback_is_called_as_pylance_calls_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance.write_dataset(
        pa.table({"a": range(1000), "s": [str(i) for i in range(1000)]}), uri, max_rows_per_file=300
    )
    theirs, ours = _stats_of(lance, uri), _stats_of(lt, uri)
    assert {k: len(v) for k, v in ours.items()} == {k: len(v) for k, v in theirs.items()}
    assert len(ours["to_table"]) == 1 and ours["before_read"] == [] and ours["count_rows"] == []
    stats = ours["to_table"][0]
    assert isinstance(stats, lt.ScanStatistics)
    assert _public(stats) == _public(theirs["to_table"][0])
    assert set(stats.all_counts) == set(theirs["to_table"][0].all_counts)
    assert stats.all_counts["rows_scanned"] == 1000 and stats.all_counts["fragments_scanned"] == 4
    assert stats.bytes_read > 0 and stats.iops > 0 and stats.requests > 0
    # a scan of one column reads fewer bytes than one of both; a limit reads one fragment
    assert 0 < ours["batches"][0].bytes_read < ours["reader"][0].bytes_read
    assert ours["limit"][0].all_counts["fragments_scanned"] == 1
    assert repr(stats).startswith("ScanStatistics(iops=")


def test_scan_stats_callback_must_be_callable(tmp_path: Path) -> None:
    ds = lt.write_dataset(pa.table({"a": [1]}), str(tmp_path / "d"))
    with pytest.raises(TypeError):
        ds.scanner(scan_stats_callback=3)


def test_set_logger_sends_lance_table_records_to_the_handler(tmp_path: Path) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    try:
        lt.set_logger(log_handler=handler, level=logging.WARNING)
        assert lt.log.LOGGER.name == "lance_table"
        logging.getLogger("lance_table.table.operations.auto_cleanup").warning("kept")
        logging.getLogger("lance_table.table.operations.auto_cleanup").info("below the level")
    finally:
        logging.getLogger("lance_table").removeHandler(handler)
        logging.getLogger("lance_table").setLevel(logging.NOTSET)
    assert [r.getMessage() for r in records] == ["kept"]
    assert handler.formatter is not None and "%(funcName)s" in handler.formatter._fmt  # type: ignore[operator]


def test_set_logger_writes_a_file(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    logger = logging.getLogger("api14-test")
    try:
        lt.set_logger(str(path), name="api14-test")
        logger.info("hello")
    finally:
        for h in list(logger.handlers):
            h.close()
            logger.removeHandler(h)
    assert "[INFO]" in path.read_text() and "hello" in path.read_text()


@pytest.mark.parametrize(
    ("value", "level"), [("debug", "DEBUG"), ("trace,foo=info", "DEBUG"), ("", "NOTSET")]
)
def test_lance_log_sets_the_level(value: str, level: str) -> None:
    env = {**os.environ, "LANCE_LOG": value}
    code = "import logging, lance_table; print(logging.getLevelName(logging.getLogger('lance_table').level))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == level


def test_log_levels_as_pylance(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("trace", "warn,lance=debug", "", "a=b"):
        monkeypatch.setenv("LANCE_LOG", value)
        assert lt.log.get_log_level() == lance.log.get_log_level()
    assert lt.log.get_python_log_level("Trace") == lance.log.get_python_log_level("Trace")


def test_sanitize_ts_is_exported_as_pylance_exports_it() -> None:
    for ts in ("2024-01-02 03:04:05", dt.datetime(2020, 5, 6, 7, 8, 9)):
        assert lt.sanitize_ts(ts) == lance.sanitize_ts(ts)
    with pytest.raises(TypeError):
        lt.sanitize_ts(3)


def test_lance_fragment_is_made_from_a_dataset_and_an_id_as_in_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance.write_dataset(pa.table({"a": range(10)}), uri, max_rows_per_file=4)
    names = list(inspect.signature(lance.LanceFragment.__init__).parameters)
    assert list(inspect.signature(lt.LanceFragment.__init__).parameters) == names
    for module in (lance, lt):
        ds = module.dataset(uri)
        frag = module.LanceFragment(ds, 1)
        assert frag.fragment_id == 1 and frag.to_table().column("a").to_pylist() == [4, 5, 6, 7]
        with pytest.raises(ValueError):
            module.LanceFragment(ds, None)
    with pytest.raises(ValueError):
        lt.LanceFragment(lt.dataset(uri), 7)


def test_commit_takes_pylances_parameters(tmp_path: Path) -> None:
    ours = list(inspect.signature(lt.LanceDataset.commit).parameters)
    assert ours == list(inspect.signature(lance.LanceDataset.commit).parameters)
    ds = lt.write_dataset(pa.table({"a": [1]}), str(tmp_path / "d"))
    op = lt.LanceOperation.Delete([], [], "false")
    with pytest.raises(lt.UnsupportedOptionError, match="namespace_client_managed_versioning"):
        lt.LanceDataset.commit(ds, op, read_version=1, namespace_client_managed_versioning=True)
    assert lt.dataset(ds.uri).version == 1


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("fragment", ["FragmentWriteProgress", "NoopFragmentWriteProgress", "BatchUDF", "Session"]),
        ("blob", ["BlobDescriptor", "BlobDescriptorArrayBuilder", "PackedBlobWriter", "DedicatedBlobWriter"]),
        ("file", ["ListResult", "LanceFileSession"]),
        ("pydantic", ["Vector", "MultiVector", "FixedSizeListMixin", "pydantic_to_schema", "is_nullable"]),
        (
            "log",
            [
                "LOGGER",
                "set_logger",
                "get_log_level",
                "get_python_log_level",
                "ENV_NAME_PYLANCE_LOGGING_LEVEL",
            ],
        ),
    ],
)
def test_pylance_module_names_are_importable_from_ours(module: str, names: list[str]) -> None:
    theirs = importlib.import_module(f"lance.{module}")
    ours = importlib.import_module(f"lance_table.{module}")
    for name in names:
        assert hasattr(theirs, name) and hasattr(ours, name), name
