"""examples/spark_pipeline.py, small, on the shared Spark session: it checks each step itself."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).parents[2] / "examples" / "spark_pipeline.py"


def test_the_spark_pipeline_example_runs(spark, tmp_path):
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    summary = module.run(spark, tmp_path, rows=100, files=2)  # one query, two micro-batches
    assert summary["updates"] == 200
    assert summary["accounts_at_version_1"] == 100
    assert summary["fragments_after_compaction"] == 1 < summary["fragments_before_compaction"]
