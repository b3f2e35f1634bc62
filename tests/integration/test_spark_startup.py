"""What makes Spark sessions and their Python workers start quicker, on real sessions and a real JVM.

- The copy job's worker daemon (`replication.worker_daemon`): the tasks of the
  suite's session run in workers forked from it, importing PySpark from the
  installed package rather than the zips Spark puts on their path.
- The driver's class archive (`replication.driver_class_archive`): the one
  `make setup` made (`class_archive_setup`; made here, as setup makes it, when the suite runs without
  setup), mapped by a new session's JVM, which loads Spark's classes from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from mirror_pipeline.config.machine_paths import cache_root
from mirror_pipeline.replication import worker_reuse
from mirror_pipeline.replication.spark_runner import SparkTasksLost, run_tasks
from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

WORKER = pa.schema([("pyspark_file", pa.string()), ("daemon", pa.string()), ("path", pa.string())])


def where_the_worker_runs(_item) -> dict:
    import pyspark

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
        daemon = cmdline.read().replace(b"\0", b" ").decode()
    return {"pyspark_file": pyspark.__file__, "daemon": daemon, "path": json.dumps(sys.path)}


def test_copy_tasks_run_in_workers_forked_from_the_pipelines_daemon(spark):
    rows = run_tasks(spark, [0, 1, 2, 3], where_the_worker_runs, WORKER)
    assert len(rows) == 4
    for row in rows:
        assert "-m mirror_pipeline.replication.worker_daemon pyspark.worker" in row["daemon"]
        assert ".zip" not in row["pyspark_file"] and row["pyspark_file"].endswith(
            os.path.join("pyspark", "__init__.py")
        )
        assert not [
            entry for entry in json.loads(row["path"]) if entry.endswith((".zip", ".jar")) and "pyspark" in entry
        ]


def crash_in_a_native_call(_item) -> dict:
    import ctypes

    ctypes.string_at(0)  # a segmentation fault, as a native library's bug would cause
    return {"x": 0}


def test_a_task_whose_worker_crashes_is_reported_with_where_it_crashed(spark):
    with pytest.raises(SparkTasksLost) as lost:
        run_tasks(spark, [0], crash_in_a_native_call, pa.schema([("x", pa.int64())]), "a crash")
    said = str(lost.value)
    assert said.startswith("the Spark job 'a crash' failed: Python worker exited unexpectedly (crashed): ")
    assert "Segmentation fault in string_at (__init__.py:" in said and "crash_in_a_native_call" not in said
    assert said.endswith("; the next plan repairs what its tasks left") and "\n" not in said
    # The session copies on: the next job's tasks run in new workers.
    assert len(run_tasks(spark, [0, 1], where_the_worker_runs, WORKER)) == 2


MAKE = """
from mirror_pipeline.replication.class_archive_setup import make_archive
print(make_archive())
"""

USE = """
import sys
from mirror_pipeline.config.loader import SparkSettings
from mirror_pipeline.replication import spark_runner

conf = spark_runner.spark_conf(SparkSettings(master="local[2]"))
conf["spark.driver.extraJavaOptions"] += f" -Xlog:class+load=info:file={sys.argv[1]}"
spark = spark_runner.session_from_conf(conf)
schema = spark_runner.pa.schema([("x", spark_runner.pa.int64())])
print(spark_runner.run_tasks(spark, [0, 1], lambda item: {"x": item}, schema))
print(conf["spark.driver.extraJavaOptions"])
"""


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_setup_makes_a_class_archive_that_a_new_session_loads_spark_from(tmp_path):
    # Setup's archive, in the cache every session looks in: making another (two training sessions, half a
    # minute of both cores) would test the same steps again.
    made = python(MAKE)
    assert made.returncode == 0, made.stderr[-2000:]
    archive = Path(made.stdout.strip().splitlines()[-1])
    assert archive.parent == cache_root() and archive.is_file() and archive.stat().st_size > 0
    assert not list(archive.parent.glob(f"{archive.name}.*.partial"))  # nothing half-written left behind

    class_log = tmp_path / "classes.log"
    used = python(USE, str(class_log))
    assert used.returncode == 0, used.stderr[-2000:]
    assert "[{'x': 0}, {'x': 1}]" in used.stdout and f"-XX:SharedArchiveFile={archive}" in used.stdout
    loads = class_log.read_text().splitlines()
    from_archive = [line for line in loads if "org.apache.spark." in line and "shared objects file (top)" in line]
    from_jars = [line for line in loads if "org.apache.spark." in line and "source: jar:" in line]
    # The archive holds what a copy job loads; Spark's classes come from it, not parsed from the jars again.
    assert len(from_archive) > 1000 and len(from_archive) > 5 * len(from_jars)

    # Made already: a second run of the setup step finds it and makes nothing.
    made_at = archive.stat().st_mtime_ns
    again = python(MAKE)
    assert again.returncode == 0 and Path(again.stdout.strip().splitlines()[-1]) == archive
    assert archive.stat().st_mtime_ns == made_at


REUSE = """
import os
from mirror_pipeline.config.loader import SparkSettings
from mirror_pipeline.replication import spark_runner
spark = spark_runner.session_from_conf(spark_runner.spark_conf(SparkSettings(master="local[1]")))
schema = spark_runner.pa.schema([("item", spark_runner.pa.int64()), ("pid", spark_runner.pa.int64())])
for item in range(6):
    (row,) = spark_runner.run_tasks(spark, [item], lambda i: {"item": i, "pid": os.getpid()}, schema)
    print(row["item"], row["pid"])
"""


def test_a_worker_ends_after_its_task_limit_and_the_next_task_gets_a_fresh_one():
    # The limit is read by the daemon from its environment: a session of its own, in a process of its own.
    env = {**os.environ, worker_reuse.MAX_TASKS_ENV: "2"}
    ran = subprocess.run([sys.executable, "-c", REUSE], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    rows = [tuple(map(int, line.split())) for line in ran.stdout.splitlines() if line.strip()]
    assert [item for item, _ in rows] == list(range(6))  # every task completed, the last of each worker too
    pids = [pid for _, pid in rows]
    # Reused for two tasks, then replaced: three workers, each serving two tasks in a row.
    assert pids[0] == pids[1] and pids[2] == pids[3] and pids[4] == pids[5], pids
    assert len(set(pids)) == 3, pids
