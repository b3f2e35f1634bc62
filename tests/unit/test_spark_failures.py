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


# As PySpark 4.0 reports a worker that crashed with its faulthandler on (`CRASH_REPORT_CONF`).
_FAULT = (
    "Job aborted due to stage failure: Task 1 in stage 0.0 failed 1 times, most recent failure: Lost task 1.0 "
    "(localhost executor driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed): "
    "Fatal Python error: Segmentation fault\n\n"
    "Thread 0x00007f7cc41be6c0 (most recent call first):\n"
    '  File "/opt/venv/lib/python3.11/threading.py", line 982 in run\n\n'
    "Current thread 0x00007f7cd19f4b80 (most recent call first):\n"
    '  File "/opt/venv/lib/python3.11/site-packages/mirror_pipeline/kafka/closing.py", line 40 in close_producer\n'
    '  File "/opt/venv/lib/python3.11/site-packages/mirror_pipeline/replication/chunks.py", line 329 in close\n'
    '  File "/opt/venv/lib/python3.11/site-packages/pyspark/worker.py", line 1669 in func\n'
)


def test_a_crashed_worker_is_named_with_where_it_crashed():
    assert lost_task(_FAULT) == (
        "Python worker exited unexpectedly (crashed): Segmentation fault in close_producer "
        "(mirror_pipeline/kafka/closing.py:40)"
    )


def test_a_crash_in_a_library_names_our_innermost_frame_too():
    fault = _FAULT.replace(
        "Current thread 0x00007f7cd19f4b80 (most recent call first):\n",
        "Current thread 0x00007f7cd19f4b80 (most recent call first):\n"
        '  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at\n',
    )
    assert lost_task(fault) == (
        "Python worker exited unexpectedly (crashed): Segmentation fault in string_at (__init__.py:519), "
        "called from close_producer (mirror_pipeline/kafka/closing.py:40)"
    )


def test_a_fault_report_without_frames_gives_the_signal():
    fault = _FAULT.split("\n\n", 1)[0]
    assert lost_task(fault) == "Python worker exited unexpectedly (crashed): Segmentation fault"
