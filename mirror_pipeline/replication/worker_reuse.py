"""A bound on how many tasks one reused Python worker runs before it ends (the copy job's daemon applies it).

Spark reuses a Python worker for task after task (`spark.python.worker.reuse`).
A reused worker's memory at the start of a task crept over a long run (from
about 107 to 194 MiB), and a copy task's memory budget counts from where it
starts. So a worker runs at most MAX_TASKS tasks: its last one ends the way
PySpark ends a worker the JVM is not to reuse. After the task's results and
accumulators, the JVM says it would reuse the worker (END_OF_STREAM); the
worker answers END_OF_DATA_SECTION instead and exits, the JVM destroys it at
the end of the task, and the next task gets a worker freshly forked from the
daemon (a few milliseconds: the daemon has every module a copy needs loaded).
The task itself completes normally either way.

It hooks two names `pyspark.worker.main` looks up at call time
(`send_accumulator_updates`, then `read_int`) for that last task only; a test
on a real session checks that workers are replaced after MAX_TASKS tasks
(`tests/integration/test_spark_startup.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import IO, Any

#: Tasks a worker runs before it ends; `MIRROR_PIPELINE_WORKER_MAX_TASKS` in the daemon's environment overrides.
MAX_TASKS = 50
MAX_TASKS_ENV = "MIRROR_PIPELINE_WORKER_MAX_TASKS"

WorkerMain = Callable[[IO[bytes], IO[bytes]], Any]


def max_tasks(environ: Mapping[str, str] = os.environ) -> int:
    """The bound in force (at least 1)."""
    try:
        return max(1, int(environ.get(MAX_TASKS_ENV, MAX_TASKS)))
    except ValueError:
        return MAX_TASKS


def limited(worker: ModuleType, limit: int | None = None) -> WorkerMain:
    """`worker.main` (`pyspark.worker`'s), ending its process's reuse after `limit` tasks (default: `max_tasks()`)."""
    bound = max_tasks() if limit is None else limit
    done = 0  # tasks this process ran: each forked worker starts from the daemon's 0

    def main(infile: IO[bytes], outfile: IO[bytes]) -> Any:
        nonlocal done
        done += 1
        if done < bound:
            return worker.main(infile, outfile)
        return _last_task(worker, infile, outfile)

    return main


def _last_task(worker: Any, infile: IO[bytes], outfile: IO[bytes]) -> Any:
    """One task, after which the worker refuses to be reused (PySpark then exits it with -1).

    `worker` is the `pyspark.worker` module (typed Any: its globals are swapped here, for this task only)."""
    real_send, real_read = worker.send_accumulator_updates, worker.read_int

    def send_then_refuse_reuse(out: IO[bytes]) -> None:
        real_send(out)

        def read_reuse_answer(stream: IO[bytes]) -> int:
            worker.read_int = real_read
            real_read(stream)  # the JVM's END_OF_STREAM ("reuse me"), consumed
            return 0  # anything else: PySpark answers END_OF_DATA_SECTION and exits

        worker.read_int = read_reuse_answer

    worker.send_accumulator_updates = send_then_refuse_reuse
    try:
        return worker.main(infile, outfile)
    finally:
        worker.send_accumulator_updates, worker.read_int = real_send, real_read
