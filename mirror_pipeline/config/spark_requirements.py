"""Spark settings the copy job depends on, for every place that builds a Spark conf.

The session builder (`replication.spark_runner`) puts them over the user's
settings; the local Spark Connect server (`local.spark_cluster`) starts with
them, since under Connect the server's conf rules.
"""

from __future__ import annotations

import os

#: A copy task's Python worker that crashes (a segmentation fault in a native library) reports where:
#: PySpark's faulthandler report goes into the job's error, which `spark_runner.lost_task` shortens to
#: a line (without it, the error says only "Python worker exited unexpectedly (crashed)").
CRASH_REPORT_CONF = {"spark.sql.execution.pyspark.udf.faulthandler.enabled": "true"}

#: Session settings a Spark Connect client may set (the rest belongs to the server).
CONNECT_SESSION_CONF = {"spark.sql.execution.arrow.pyspark.enabled": "true", **CRASH_REPORT_CONF}

#: Spark's own JVMs (drivers, the local cluster's daemons and executors): the C1 compiler only and the
#: serial collector. They start in about half the time on two busy cores, and what runs in them is light,
#: since the copy's work is in Python and librdkafka. In a local[*] session the first copy job's JVM used
#: 2.6 CPU seconds instead of 4.7, and a warm copy of 1,000,000 records 0.2 instead of 0.9
#: (`benchmarks/throughput.py`).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: The copy job's own Python worker daemon (`replication.worker_daemon`): PySpark's, importing PySpark from
#: the installed package rather than the zip Spark puts first on the workers' path, and importing what a copy
#: task needs before it forks. A warm no-op job of 8 tasks took 0.27 s instead of 0.58, the first job of a
#: session 2.9 s instead of 3.5 (`benchmarks/throughput.py` shows the copy). A default: users may name their own.
WORKER_DAEMON_CONF = {"spark.python.daemon.module": "mirror_pipeline.replication.worker_daemon"}

# Settings the copy job's correctness depends on: they win over user settings.
REQUIRED_CONF = {
    # A speculative duplicate of a copy task would be a second writer.
    "spark.speculation": "false",
    # A retried task would find the mirror moved on and refuse; the next
    # cycle resumes instead, from what actually landed.
    "spark.task.maxFailures": "1",
}


#: Spark task slots per core when no master is configured.
TASK_SLOTS_PER_CORE = 2


def default_local_master() -> str:
    """`local[K]` with two task slots per core this process may use.

    A copy task does not keep its core busy: it waits on the brokers while each
    chunk is acknowledged and its segment committed, and while a new unit fences
    and checks its partition. With one slot per core (`local[*]`) a warm copy of
    1,000,000 records on 2 cores left a tenth of the CPU idle and ran at 131,000
    records/s; with two per core it ran at 160,000 (`benchmarks/throughput.py`).
    Each slot holds a Python worker and its task's memory budget.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return f"local[{TASK_SLOTS_PER_CORE * cores}]"
