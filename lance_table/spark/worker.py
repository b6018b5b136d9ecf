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

Spark runs a task on each core it has (``spark.task.cpus`` cores a task, one by default), so a
task's decoding runs on the task's own thread (:func:`on_task_cores`): the thread pools would
only share the task's core with it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import TypeVar

from lance_table._parallel import on_one_core

T = TypeVar("T")

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


def task_cores() -> int | None:
    """The cores Spark gave the task running here (``spark.task.cpus``), or None outside a task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None
    try:
        return int(ctx.cpus())
    except (TypeError, ValueError):  # a context that does not say
        return None


def on_task_cores(steps: Iterator[T]) -> Iterator[T]:
    """The items of ``steps``, each made with the cores the running Spark task has: in a task of
    one core, the CPU work of each step (decoding, see :func:`~lance_table._parallel.on_one_core`)
    runs on the calling thread; in a task of more cores, or outside Spark, on the pools as
    anywhere else. The calling thread is marked only while a step runs, not while the consumer
    holds an item.

    Example:
        ```python
        from lance_table.spark.worker import on_task_cores

        print(list(on_task_cores(iter([1, 2]))))  # outside Spark: as they come
        ```
    """
    if task_cores() != 1:
        yield from steps
        return
    while True:
        with on_one_core():
            try:
                item = next(steps)
            except StopIteration:
                return
        yield item
