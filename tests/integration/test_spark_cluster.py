"""The pipeline on a real Spark cluster (R-EX-3): a standalone master with two workers, and Spark Connect.

`local spark up` starts the master, two workers and a Connect server from the
installed pyspark in `<repo>/.local-kafka/test-spark`, on ports 11077-11082
and 11502 (below Linux's ephemeral range, clear of the test brokers' 11592).
Like the test brokers they are shared by concurrent pytest runs through
lease files, and the last run to finish stops them
(MIRROR_PIPELINE_KEEP_TEST_KAFKA=1 keeps them for the next session).

Each test runs one cycle with `mirror-pipeline run` in a process of its own
(a Python process holds one kind of session: the suite's local one, or a
Connect client), configured only through the `spark:` section, and checks the
mirror record by record, offsets included, and that executors on the workers
did the copying.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.config.spark_requirements import QUICK_JVM
from mirror_pipeline.local.spark_cluster import WORKER_CORES, WORKERS, LocalSpark
from tests.cli_process import run_cli
from tests.config_files import write_pair_config
from tests.conftest import REPO, shared_between_runs
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPARK_ROOT = REPO / ".local-kafka" / "test-spark"
SPARK_SESSIONS_DIR = REPO / ".local-kafka" / "test-spark-sessions"
MASTER_PORT = 11077  # its web UI 11078, workers 11079-11082
CONNECT_PORT = 11502
PARTITIONS = 3
RECORDS = 300


@pytest.fixture(scope="session")
def local_spark():
    """The master, two workers and the Connect server, running; stopped by the last run that used them."""
    cluster = LocalSpark(SPARK_ROOT, master_port=MASTER_PORT, connect_port=CONNECT_PORT)
    with shared_between_runs(SPARK_SESSIONS_DIR, cluster.up, cluster.down):
        yield cluster


def produce_records(bootstrap: str, topic: str) -> None:
    """Keys and values null and binary, repeated and binary headers, old timestamps, on every partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        headers = [("trace", b"\x00\x01\xff"), ("dup", b"a"), ("dup", b"b"), ("empty", b"")] if i % 3 else None
        producer.produce(
            topic,
            key=None if i % 7 == 0 else f"key-{i}".encode(),
            value=None if i % 11 == 0 else bytes(range(256)) * (i % 4),
            headers=headers,
            partition=i % PARTITIONS,
            timestamp=978307200000 + i,
        )
    assert producer.flush(30) == 0


def run_cycle_in_a_process(tmp_path: Path, source: str, destination: str, spark: dict, topic: str) -> dict:
    """`mirror-pipeline run --link ... --json` with `spark` as the config's spark section; its JSON."""
    path = write_pair_config(tmp_path / "mirror.yaml", source, destination, LINK)
    data = yaml.safe_load(path.read_text())
    data["spark"] = spark
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(path)
    engine.create_mirror(config, LINK, topic)
    home = tmp_path / "dagster-home"
    home.mkdir()
    out = run_cli(home, "run", "--link", LINK, "--mirror", topic, "--config", str(path), "--json", timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout)


def check_mirror(result: dict, source: str, destination: str, topic: str) -> None:
    assert result["records"] == RECORDS and result["lag_after"] == 0
    per_partition = RECORDS // PARTITIONS
    for p in result["mirrors"][topic]["partitions"]:
        assert (p["source_from"], p["source_until"]) == (0, per_partition)
        assert (p["dest_from"], p["dest_until"]) == (0, per_partition)
    # Byte for byte, at the same offsets.
    assert_identical(read_topic(source, topic, PARTITIONS), read_topic(destination, topic, PARTITIONS))


def master_status(cluster: LocalSpark) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.master_port + 1}/json/", timeout=5) as response:
        return json.loads(response.read())


def applications(cluster: LocalSpark, name: str) -> set[str]:
    """Ids of the master's applications called `name`, running or done (the master may not have
    noticed yet that a driver's process has exited)."""
    status = master_status(cluster)
    return {a["id"] for a in status.get("activeapps", []) + status.get("completedapps", []) if a["name"] == name}


def executor_workers(cluster: LocalSpark, app_ids: set[str]) -> list[str]:
    """The workers that ran an executor of one of `app_ids` (each executor has a directory there)."""
    return [
        w.name
        for w in cluster.workers
        if any((w.dir / "work" / app).is_dir() and any((w.dir / "work" / app).iterdir()) for app in app_ids)
    ]


def test_up_is_idempotent_and_reports_every_daemon(local_spark):
    before = {i.name: i.pid for i in local_spark.status()}
    started = time.monotonic()
    again = local_spark.up()
    assert time.monotonic() - started < 15
    assert {i.name: i.pid for i in again} == before
    assert [i.name for i in again] == ["master", "worker-1", "worker-2", "connect"]
    assert all(i.running for i in again)
    status = master_status(local_spark)
    assert status["aliveworkers"] == 2 and status["cores"] == WORKERS * WORKER_CORES


def test_a_cycle_runs_on_the_standalone_master(
    local_spark, tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(
        source_bootstrap, unique_name("standalone"), partitions=PARTITIONS, config={"retention.ms": "-1"}
    )
    produce_records(source_bootstrap, topic)
    # Executors that start quickly on two busy cores, like the local cluster's own (the driver's are by default).
    spark = {
        "master": local_spark.master_url,
        "conf": {"spark.executor.memory": "512m", "spark.executor.extraJavaOptions": QUICK_JVM},
    }
    known = applications(local_spark, "mirror-pipeline")

    result = run_cycle_in_a_process(tmp_path, source_bootstrap, destination_bootstrap, spark, topic)

    check_mirror(result, source_bootstrap, destination_bootstrap, topic)
    ours = applications(local_spark, "mirror-pipeline") - known
    assert ours, "the cycle's application never registered with the master"
    assert executor_workers(local_spark, ours), "no worker ran an executor of the cycle's application"


def test_a_cycle_runs_through_spark_connect(
    local_spark, tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name("connect"), partitions=PARTITIONS, config={"retention.ms": "-1"})
    produce_records(source_bootstrap, topic)

    result = run_cycle_in_a_process(
        tmp_path, source_bootstrap, destination_bootstrap, {"remote": local_spark.connect_url}, topic
    )

    check_mirror(result, source_bootstrap, destination_bootstrap, topic)
    connect_apps = applications(local_spark, "Spark Connect server (mirror-pipeline)")
    assert executor_workers(local_spark, connect_apps), "no worker ran an executor of the Connect server"
