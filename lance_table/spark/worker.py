"""What lance_table does once in each of Spark's Python worker processes.

Spark reuses a Python worker for task after task (and the workers that plan reads and writes and
commit them on the driver for call after call), and its daemon runs a full garbage collection
after every one of them. That pass walks every object the worker holds: the modules, classes and
functions that the imports of pyarrow, pandas, PySpark and lance_table made (about 100,000
objects), some 20-30 ms of CPU for each task whatever its size. :func:`settle_worker` moves the
objects alive when lance_table first runs in a worker (what the worker keeps for its whole life)
out of reach of the collector's passes (``gc.freeze``), so the pass after each task only walks
what the task itself made. Objects that become garbage later are still freed by reference
counting.
"""

from __future__ import annotations

import gc
import os

#: set by Spark in the environment of the Python workers it reuses
REUSED_WORKER = "SPARK_REUSE_WORKER"
#: the process whose objects were frozen (a worker forked from it starts again)
_settled_pid: int | None = None


def settle_worker() -> None:
    """In a Python worker that Spark reuses, once per process: collect the garbage there is, then
    freeze the objects that remain (see the module docstring). Elsewhere (the driver's own
    Python, a worker Spark does not reuse): nothing.

    Example:
        ```python
        from lance_table.spark.worker import settle_worker

        settle_worker()  # outside Spark's Python workers this does nothing
        ```
    """
    global _settled_pid
    pid = os.getpid()
    if _settled_pid == pid or os.environ.get(REUSED_WORKER) != "1":
        return
    _settled_pid = pid
    gc.collect()
    gc.freeze()
