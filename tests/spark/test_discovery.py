"""Spark finds the ``lance_table`` source from any working directory (issue 31).

Spark looks Python data sources up in a fresh worker by listing the top-level modules on
``sys.path`` whose names start with ``pyspark_`` (``pkgutil.iter_modules``). The check runs that
same lookup in a process started outside the repository, without ``PYTHONPATH``: it passes after
``pip install .`` and after the README's editable install (``editable_mode=compat``), and fails
after a plain ``pip install -e .``, whose import hook ``iter_modules`` cannot see.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LOOKUP = """
from importlib import import_module
from pkgutil import iter_modules
from pyspark.sql.datasource import DataSource
found = {}
for info in iter_modules():
    if info.name.startswith("pyspark_"):
        mod = import_module(info.name)
        source = getattr(mod, "DefaultSource", None)
        if isinstance(source, type) and issubclass(source, DataSource):
            found[source.name()] = info.name
print(found.get("lance_table"))
"""


def test_spark_lookup_finds_the_source_outside_the_repository(tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql.datasource")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", LOOKUP], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pyspark_lance_table", (
        "Spark cannot find the lance_table source from another directory: install with "
        "`pip install .` or `pip install -e . --config-settings editable_mode=compat`"
    )
