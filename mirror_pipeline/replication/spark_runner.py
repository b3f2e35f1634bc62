"""The Spark side: session settings and running a cycle's work units as one job.

A cycle's work units become one Spark job (R-EX-1), dealt to its tasks by
`task_groups`. `mapInArrow` is used rather than the RDD API so the same code
runs under classic Spark and Spark Connect.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from mirror_pipeline.config.loader import SparkSettings
from mirror_pipeline.config.spark_requirements import CONNECT_SESSION_CONF, QUICK_JVM, REQUIRED_CONF, WORKER_DAEMON_CONF
from mirror_pipeline.model.errors import ConfigError, MirrorError
from mirror_pipeline.replication.copier import CopyContext, UnitResult, WorkUnit
from mirror_pipeline.replication.driver_class_archive import driver_archive_options
from mirror_pipeline.replication.group_copy import copy_units

if TYPE_CHECKING:  # imported where a session starts: a CLI command without one never loads PySpark
    from pyspark.sql import SparkSession

# What the copy runs on: a classic or a Spark Connect session (two unrelated classes), or a
# LazySession standing in for one.
Spark = Any
_Item = TypeVar("_Item")

log = logging.getLogger(__name__)

LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")

RESULT_SCHEMA = pa.schema(
    [
        ("mirror_topic", pa.string()),
        ("partition", pa.int64()),
        ("source_from", pa.int64()),
        ("source_until", pa.int64()),
        ("dest_from", pa.int64()),
        ("dest_until", pa.int64()),
        ("records", pa.int64()),
        ("bytes", pa.int64()),
        ("first_timestamp", pa.int64()),
        ("last_timestamp", pa.int64()),
        ("error_kind", pa.string()),
        ("error", pa.string()),
        ("latency_min_ms", pa.int64()),
        ("latency_max_ms", pa.int64()),
        ("latency_sum_ms", pa.int64()),
        ("latency_records", pa.int64()),
        ("rss_start_bytes", pa.int64()),
        ("rss_peak_bytes", pa.int64()),
        ("left_to_next_epoch", pa.bool_()),
        ("ready_at", pa.float64()),
        ("fenced_after_hand_over_ms", pa.int64()),
        ("ready_after_hand_over_ms", pa.int64()),
        ("rounds_held", pa.int64()),
    ]
)

#: What makes a session a Spark Connect client.
CONNECT_KEY = "spark.remote"


def use_this_python(python: str | None = None, master: str = "local[*]") -> None:
    """Make Spark's Python workers run `python`, else this interpreter (the one with confluent-kafka).

    Classic PySpark takes the executors' interpreter from PYSPARK_PYTHON when a
    session starts, not from the conf: an explicit `spark.pyspark.python` is
    copied there, as spark-submit does. Under Spark Connect the server's own
    PYSPARK_PYTHON decides.
    """
    if python:
        os.environ["PYSPARK_PYTHON"] = python
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Sessions on this machine bind to loopback, not whatever the host name resolves to; the
    # driver of a cluster elsewhere binds where that cluster's executors can reach it.
    if re.match(r"local\b|spark://(127\.0\.0\.1|localhost)[:,/]", master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def spark_conf(settings: SparkSettings) -> dict[str, str]:
    """Spark settings for the pipeline's session: defaults, the user's, then the required ones.

    With `remote` (or `spark.remote` in the conf) the session is a Spark Connect
    client: no master, and only session settings, since the server's own conf
    holds the rest; `session_from_conf` checks the required ones there.
    """
    user = {k: str(v) for k, v in settings.conf.items()}
    remote = getattr(settings, "remote", None) or user.get(CONNECT_KEY)
    if remote:
        user.pop("spark.master", None)
        return {**CONNECT_SESSION_CONF, **user, CONNECT_KEY: remote}
    use_this_python(user.get("spark.pyspark.python"), user.get("spark.master", settings.master))
    conf = {
        "spark.master": settings.master,
        "spark.app.name": "mirror-pipeline",
        # Executors must run the interpreter that has confluent-kafka installed.
        "spark.pyspark.python": os.environ["PYSPARK_PYTHON"],
        "spark.pyspark.driver.python": sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **CONNECT_SESSION_CONF,
        "spark.python.worker.reuse": "true",
        **WORKER_DAEMON_CONF,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_CONFIG} {QUICK_JVM} "
        f"{driver_archive_options()}".rstrip(),
    }
    conf.update(user)
    conf.update(REQUIRED_CONF)
    return conf


def spark_session(settings: SparkSettings) -> SparkSession:
    """A Spark session for the CLI and tests: classic, or a Spark Connect client (`remote`)."""
    return session_from_conf(spark_conf(settings))


class LazySession:
    """A Spark session started on first use: a CLI cycle with nothing to copy never starts one
    (a session's start is most of an empty `run`).

    `while_starting` is called just before the session starts, once PySpark is imported: work it
    hands to another thread then runs beside the JVM's start (two seconds in which this process
    mostly waits), not beside PySpark's import on this thread.
    """

    def __init__(self, settings: SparkSettings, while_starting: Callable[[], object] | None = None) -> None:
        self._settings = settings
        self._while_starting = while_starting
        self._session: SparkSession | None = None

    def __getattr__(self, name: str) -> Any:
        if self._session is None:
            if self._while_starting is not None:
                import pyspark.sql  # noqa: F401  (what `spark_session` imports first, here before the hand-off)

                self._while_starting()
            self._session = spark_session(self._settings)
        return getattr(self._session, name)


def session_from_conf(conf: dict[str, str]) -> SparkSession:
    """The session `conf` (from `spark_conf`) describes; a Spark Connect one when it holds `spark.remote`.

    The Dagster resource builds its session from the same settings.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if CONNECT_KEY in conf:
        _check_connect_server(session)  # no SparkContext, so no log level to set
    else:
        session.sparkContext.setLogLevel("ERROR")
    return session


def _check_connect_server(session: SparkSession) -> None:
    """Refuse a Spark Connect server that would run speculative copies; warn when it retries tasks."""

    def setting(key: str, default: str) -> str:
        return str(session.conf.get(key, None) or default).strip().lower()

    if setting("spark.speculation", "false") != REQUIRED_CONF["spark.speculation"]:
        session.stop()
        raise ConfigError(
            "spark.remote: the Spark Connect server runs with spark.speculation=true, which would "
            "start second writers of a mirror partition; start it with spark.speculation=false"
        )
    if setting("spark.task.maxFailures", "4") != REQUIRED_CONF["spark.task.maxFailures"]:
        log.warning(
            "the Spark Connect server retries failed tasks (spark.task.maxFailures is not 1): a retried "
            "copy task refuses and its partition waits for the next cycle"
        )


def run_unit_groups(
    spark: Spark, groups: Sequence[Sequence[WorkUnit]], ctx: CopyContext, description: str = ""
) -> list[UnitResult]:
    """Copy every group's units in one Spark job, one task per group (`task_groups`); one result per unit."""
    rows = run_tasks(
        spark, list(groups), lambda group: [r.to_row() for r in copy_units(group, ctx)], RESULT_SCHEMA, description
    )
    return [UnitResult(**row) for row in rows]


def task_slots(spark: Spark) -> int:
    """How many tasks the session runs at once (its default parallelism); 2 when it cannot tell.

    Follow mode's tasks all run for the whole epoch, so there must be no more
    of them than this: a task waiting for a slot would copy nothing until then.
    A verify divides its throttle by it and splits a few big partitions into it.
    """
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect: no SparkContext; the server's conf may say
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism")))
        except Exception:
            return 2


def run_tasks(
    spark: Spark,
    items: Sequence[_Item],
    run_one: Callable[[_Item], dict[str, Any] | list[dict[str, Any]]],
    schema: pa.Schema,
    description: str = "",
) -> list[dict[str, Any]]:
    """`run_one(item)` for every item in one Spark job, one task each; its result rows, as dicts of `schema`.

    `run_one` returns one row or a list of rows. `items` and `run_one` are
    shipped to the tasks, so they must be picklable plain values (clients are
    built inside the task).
    """
    if not items:
        return []
    items = list(items)

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = []
            for i in batch.column("id").to_pylist():
                out = run_one(items[i])
                rows += out if isinstance(out, list) else [out]
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    if description:
        try:
            spark.sparkContext.setJobDescription(description)
        except Exception:  # Spark Connect has no SparkContext; the description is cosmetic.
            pass
    frame = spark.range(0, len(items), 1, numPartitions=len(items)).mapInArrow(run_partition, ddl_of(schema))
    try:
        return [row.asDict() for row in frame.collect()]
    except Exception as exc:
        lost = lost_task(str(exc))
        if lost is None:
            raise
        if "Fatal Python error: " in str(exc):  # the whole faulthandler report, for a bug report
            log.warning("a task's Python worker crashed: %s", str(exc).split("Fatal Python error: ", 1)[1])
        raise SparkTasksLost(
            f"the Spark job '{description or 'of the copy'}' failed: {lost}; the next plan repairs what its tasks left"
        ) from None


class SparkTasksLost(MirrorError):
    """A Spark job failed because a task's process was lost (killed, crashed, its executor gone):
    what its tasks wrote is repaired by the next plan, as after a crashed cycle."""


def lost_task(message: str) -> str | None:
    """Why a Spark job failed, in a few words, when a task's process was lost; None when a task
    raised (a Python traceback: a bug, shown as one) or the job failed otherwise."""
    if "Traceback (most recent call last)" in message:
        return None
    if "ExecutorLostFailure" in message:
        return "an executor was lost"
    said = message.rsplit("SparkException: ", 1)
    if len(said) < 2 or "Job aborted due to stage failure" not in message:
        return None
    crash = said[1].split(": Fatal Python error: ", 1)
    if len(crash) == 2:  # the worker's faulthandler told where (`CRASH_REPORT_CONF`)
        return f"{crash[0].strip()}: {crash_site(crash[1])}"
    reason = re.split(r"\. | at ", said[1], maxsplit=1)[0].strip().rstrip(".")
    return reason[:200] or None


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def crash_site(fault: str) -> str:
    """What a Python faulthandler report (after 'Fatal Python error: ') says in one line: the
    signal, the crashed thread's innermost frame and, when that is not ours, our innermost one."""
    signal = fault.split("\n", 1)[0].strip()
    current = fault.split("Current thread", 1)[1:]  # the other threads' stacks come first
    frames = [(_short(m["path"]), m["line"], m["func"]) for text in current for m in _FRAME.finditer(text)]
    if not frames:
        return signal
    where = [frames[0]]
    ours = next((f for f in frames if f[0].startswith("mirror_pipeline/")), None)
    if ours and ours != frames[0]:
        where.append(ours)
    return f"{signal} in " + ", called from ".join(f"{func} ({path}:{line})" for path, line, func in where)


def _short(path: str) -> str:
    """A frame's file from the package down (`mirror_pipeline/kafka/closing.py`), else its name alone."""
    tail = path.rsplit("/mirror_pipeline/", 1)
    return "mirror_pipeline/" + tail[1] if len(tail) == 2 else path.rsplit("/", 1)[-1]


def ddl_of(schema: pa.Schema) -> str:
    """Spark's DDL for a schema of strings, 64-bit integers and booleans."""
    return ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in schema)


_SPARK_TYPES = {pa.string(): "string", pa.int64(): "long", pa.bool_(): "boolean", pa.float64(): "double"}
