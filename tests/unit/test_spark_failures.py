"""A Spark job whose task's process was lost is a failure the next plan repairs, said in a few words (`lost_task`)."""

from __future__ import annotations

from mirror_pipeline.replication.spark_runner import lost_task

_CRASHED = (
    "An error occurred while calling o99.collectToPython. : org.apache.spark.SparkException: Job aborted due to "
    "stage failure: Task 0 in stage 2.0 failed 1 times, most recent failure: Lost task 0.0 in stage 2.0 (TID 2) "
    "(localhost executor driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). "
    "Consider setting 'spark.python.worker.faulthandler.enabled' configuration to 'true' for the better Python "
    "traceback. at org.apache.spark.api.python.BasePythonRunner$ReaderIterator.hasNext(PythonRunner.scala:532) "
    "Caused by: org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). Consider setting "
    "'spark.python.worker.faulthandler.enabled' at org.apache.spark.scheduler.Task.run(Task.scala:147) "
    "Caused by: java.io.EOFException at java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)"
)


def test_a_killed_python_worker_is_named_in_a_few_words():
    assert lost_task(_CRASHED) == "Python worker exited unexpectedly (crashed)"


def test_a_lost_executor_is_named():
    assert lost_task("Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)") == (
        "an executor was lost"
    )


def test_a_python_error_in_a_task_is_a_bug_and_not_taken_for_a_lost_task():
    raised = (
        "Job aborted due to stage failure: Task 0 failed: org.apache.spark.api.python.PythonException: "
        "Traceback (most recent call last): File 'group_copy.py', line 1, in run ZeroDivisionError: boom"
    )
    assert lost_task(raised) is None


def test_other_failures_are_left_as_they_are():
    assert lost_task("java.lang.OutOfMemoryError: Java heap space") is None
