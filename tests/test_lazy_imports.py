"""``import lance_table`` stays cheap: its public names are imported on first use (PEP 562), the
optional and heavy libraries (sqlglot, pandas, pyspark, duckdb, polars) are not imported with it,
and every public name still resolves, through attribute access, ``from ... import`` and ``dir()``."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("sqlglot", "pandas", "pyspark", "duckdb", "polars", "pyarrow.dataset", "fsspec", "click", "rich")
LAZY_PACKAGES = ("lance_table", "lance_table.file", "lance_table.table")


def _loaded_after(code: str) -> list[str]:
    """The top modules of ``HEAVY`` loaded in a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT)
    return [m for m in out.stdout.strip().split(",") if m]


def test_import_loads_no_heavy_library() -> None:
    assert _loaded_after("import lance_table") == []


def test_import_of_the_file_and_table_packages_loads_no_heavy_library() -> None:
    assert _loaded_after("import lance_table.file, lance_table.table") == []


def test_the_loaded_modules_of_the_package_are_few() -> None:
    code = "import sys, lance_table\nprint(len([m for m in sys.modules if m.startswith('lance_table')]))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT)
    assert int(out.stdout) <= 5  # the package, its errors, its logger and the lazy helper


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is not None, name
        assert name in dir(module), name


def test_every_public_name_resolves_in_a_fresh_process() -> None:
    """Each name of ``lance_table.__all__`` imported alone (``from lance_table import X``) in a fresh
    interpreter, where nothing else has imported its module yet."""
    code = (
        "import importlib, lance_table\n"
        "names = list(lance_table.__all__)\n"
        "assert set(names) <= set(dir(lance_table)), set(names) - set(dir(lance_table))\n"
        "for name in names:\n"
        "    exec(f'from lance_table import {name}')\n"
        "assert lance_table.dataset.__module__ == 'lance_table.table.entry'\n"
        "assert lance_table.LanceDataset.__module__ == 'lance_table.table.dataset'\n"
        "assert lance_table.Dataset is lance_table.LanceDataset\n"
        "assert lance_table.commit.__name__ == 'lance_table.commit'\n"
        "assert isinstance(lance_table.__version__, str) and lance_table.__version__\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_unknown_names_raise_attribute_error() -> None:
    import lance_table

    with pytest.raises(AttributeError, match="no_such_name"):
        lance_table.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from lance_table import no_such_name")
    assert not hasattr(lance_table.file, "no_such_name")


def test_lance_log_applies_on_import(tmp_path: Path) -> None:
    """pylance applies ``LANCE_LOG`` when ``lance`` is imported; so does ``import lance_table``."""
    code = "import logging, lance_table; print(logging.getLogger('lance_table').level)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "LANCE_LOG": "debug"},
    )
    assert int(out.stdout) == 10


def test_reading_a_dataset_imports_no_writer(tmp_path: Path) -> None:
    """Opening, counting, scanning with a filter and taking rows import the read path only: the
    file writers, the 2.x encoders and the write operations load with the first write."""
    import pyarrow as pa

    import lance_table

    uri = str(tmp_path / "ds")
    lance_table.write_dataset(pa.table({"id": list(range(100)), "s": ["a", "b"] * 50}), uri)
    writers = (
        "lance_table.file.writer",
        "lance_table.file.v2_1.encode",
        "lance_table.file.legacy.writer",
        "lance_table.file.compression.fsst_train",
        "lance_table.table.operations.write",
        "lance_table.table.operations.merge_insert",
        "lance_table.table.operations.update",
        "lance_table.table.operations.compaction",
        "lance_table.table.operations.schema_alter",
    )
    code = (
        "import sys, lance_table as lt\n"
        f"ds = lt.dataset({uri!r})\n"
        "assert ds.count_rows() == 100\n"
        "assert ds.to_table(filter=\"s = 'a' AND id < 10\").num_rows == 5\n"
        "assert ds.take([1, 2]).column('id').to_pylist() == [1, 2]\n"
        f"print(','.join(m for m in {writers!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == ""
    # and a write in the same kind of process still finds them
    code = (
        f"import lance_table as lt\nds = lt.dataset({uri!r})\nds.delete('id < 10')\n"
        "assert ds.count_rows() == 90"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
