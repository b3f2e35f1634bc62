"""A reused Python worker's task limit (`replication.worker_reuse`), on a stand-in for `pyspark.worker`.

The stand-in ends a task as PySpark's `main` does: accumulators sent, then
the JVM's answer read; END_OF_STREAM (-4) means "reuse me". The real module
is exercised on a real session in tests/integration/test_spark_startup.py.
"""

from __future__ import annotations

import types

from mirror_pipeline.replication import worker_reuse

END_OF_STREAM = -4


def stand_in() -> types.SimpleNamespace:
    worker = types.SimpleNamespace(answers=[], reads=0)

    def send_accumulator_updates(_out) -> None:
        pass

    def read_int(_stream) -> int:
        worker.reads += 1
        return END_OF_STREAM

    def main(infile, outfile) -> None:
        worker.send_accumulator_updates(outfile)
        worker.answers.append("reuse" if worker.read_int(infile) == END_OF_STREAM else "end")

    worker.send_accumulator_updates, worker.read_int, worker.main = send_accumulator_updates, read_int, main
    return worker


def test_the_last_task_of_a_worker_refuses_reuse_and_the_module_is_left_as_it_was():
    worker = stand_in()
    original = (worker.send_accumulator_updates, worker.read_int)
    main = worker_reuse.limited(worker, limit=3)
    for _ in range(3):
        main(None, None)
    assert worker.answers == ["reuse", "reuse", "end"]
    assert worker.reads == 3  # the JVM's answer is consumed on the last task too
    assert (worker.send_accumulator_updates, worker.read_int) == original


def test_the_bound_comes_from_the_environment_and_is_at_least_one():
    assert worker_reuse.max_tasks({}) == worker_reuse.MAX_TASKS
    assert worker_reuse.max_tasks({worker_reuse.MAX_TASKS_ENV: "7"}) == 7
    assert worker_reuse.max_tasks({worker_reuse.MAX_TASKS_ENV: "0"}) == 1
    assert worker_reuse.max_tasks({worker_reuse.MAX_TASKS_ENV: "many"}) == worker_reuse.MAX_TASKS
