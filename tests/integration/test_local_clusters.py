"""The embedded local Kafka clusters, on real brokers.

The session clusters (conftest `local_kafka`) cover up/status/produce/consume;
restarting is tested on a separate one-cluster instance so the session's
clusters are never stopped mid-run.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from mirror_pipeline.cli import cli
from mirror_pipeline.local.clusters import LocalKafka
from mirror_pipeline.local.processes import running_pid
from mirror_pipeline.model.errors import LocalClusterError
from tests.ports import free_port_pair

pytestmark = pytest.mark.integration


def _free_base_port() -> int:
    return free_port_pair(19792, 19892)


def _produce_one(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    try:
        producer.produce(topic, key=key, value=value, headers=[("origin", b"test")])
        assert producer.flush(30) == 0, "record not delivered within 30 s"
    finally:
        producer.close()


def _consume(bootstrap: str, topic: str, group: str, count: int, timeout: float = 30.0) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    records = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            records.append(msg)
        if records:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return records


def _run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_up_is_idempotent(local_kafka: LocalKafka) -> None:
    before = {i.name: i.pid for i in local_kafka.status()}
    assert all(before.values())

    again = LocalKafka(local_kafka.root, count=local_kafka.count, base_port=local_kafka.base_port)
    started = time.monotonic()
    after = again.up()
    assert time.monotonic() - started < 10, "a second up should start nothing"
    assert {i.name: i.pid for i in after} == before
    assert all(i.running for i in after)


def test_status_reports_running_clusters_that_answer(local_kafka: LocalKafka) -> None:
    infos = local_kafka.status()
    assert [i.name for i in infos] == ["us-west", "us-east", "eu-west"]
    base = local_kafka.base_port
    assert [i.bootstrap for i in infos] == [
        f"127.0.0.1:{base}",
        f"127.0.0.1:{base + 10000}",
        f"127.0.0.1:{base + 20000}",
    ]
    cluster_ids = set()
    for info in infos:
        assert info.running and info.pid
        assert info.data_dir == local_kafka.root / info.name
        assert info.to_dict()["data_dir"] == str(info.data_dir)
        metadata = AdminClient({"bootstrap.servers": info.bootstrap}).list_topics(timeout=10)
        assert list(metadata.brokers) == [1]
        cluster_ids.add(metadata.cluster_id)
    assert len(cluster_ids) == 3, "each local cluster must be a separate Kafka cluster"


@pytest.mark.parametrize("index", [0, 1, 2], ids=["us-west", "us-east", "eu-west"])
def test_record_round_trips(
    index: int,
    local_kafka: LocalKafka,
    create_topic: Callable[..., str],
    unique_name: Callable[..., str],
) -> None:
    bootstrap = local_kafka.bootstraps[index]
    topic = create_topic(bootstrap, unique_name("topic"))

    _produce_one(bootstrap, topic, b"k1", b"hello " + bootstrap.encode())

    [record] = _consume(bootstrap, topic, unique_name("group"), count=1)
    assert (record.key(), record.value()) == (b"k1", b"hello " + bootstrap.encode())
    assert record.headers() == [("origin", b"test")]


def test_unknown_topics_are_not_auto_created(
    source_bootstrap: str, admin: Callable[[str], AdminClient], unique_name: Callable[..., str]
) -> None:
    topic = unique_name()
    producer = Producer({"bootstrap.servers": source_bootstrap, "message.timeout.ms": 2000})
    try:
        producer.produce(topic, value=b"x")
        producer.flush(10)
    finally:
        producer.close()
    assert topic not in admin(source_bootstrap).list_topics(timeout=10).topics


def test_up_refuses_ports_held_by_another_cluster(local_kafka: LocalKafka, tmp_path: Path) -> None:
    intruder = LocalKafka(tmp_path / "intruder", count=1, base_port=local_kafka.base_port)
    with pytest.raises(LocalClusterError, match="already in use"):
        intruder.up()
    assert not (tmp_path / "intruder" / "us-west" / "data").exists()


def test_cli_status_json(local_kafka: LocalKafka) -> None:
    exe = Path(sys.executable).with_name("mirror-pipeline")
    result = subprocess.run(
        [str(exe), "local", "status", "--json", "--dir", str(local_kafka.root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    reported = json.loads(result.stdout)
    assert reported == [i.to_dict() for i in local_kafka.status()]
    assert set(reported[0]) == {"name", "bootstrap", "running", "pid", "data_dir"}

    code, text = _run_cli("local", "status", "--dir", str(local_kafka.root))
    assert code == 0
    lines = text.strip().splitlines()
    assert len(lines) == 3 and all("running" in line for line in lines)


def test_cli_on_empty_dir_is_a_quiet_success(tmp_path: Path) -> None:
    code, text = _run_cli("local", "down", "--dir", str(tmp_path), "--json")
    assert (code, json.loads(text)) == (0, [])
    code, text = _run_cli("local", "status", "--dir", str(tmp_path))
    assert code == 0 and "no local Kafka cluster is running" in text


def test_down_then_up_keeps_data(tmp_path: Path, create_topic: Callable[..., str]) -> None:
    port = _free_base_port()
    kafka = LocalKafka(tmp_path / "restart", count=1, base_port=port)
    try:
        [info] = kafka.up()
        topic = create_topic(info.bootstrap, "kept-topic")
        _produce_one(info.bootstrap, topic, b"k", b"survives restart")

        [stopped] = kafka.down()
        assert (stopped.name, stopped.pid, stopped.running) == ("us-west", info.pid, False)
        assert not kafka.status()[0].running
        assert not (kafka.root / "us-west" / "broker.pid").exists()
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0
        assert kafka.down() == []

        # No --clusters/--base-port: `up` reuses what the first `up` recorded. Started as a shell
        # starts a background job, and as Dagster's CLIs leave a process (SIGINT and SIGTERM
        # ignored): the broker must still stop on `down`'s SIGTERM, not wait for its SIGKILL.
        up = subprocess.run(
            ["bash", "-c", 'trap "" TERM INT; exec "$0" -m mirror_pipeline local up --dir "$1" --json']
            + [sys.executable, str(kafka.root)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert up.returncode == 0, up.stderr
        [restarted] = json.loads(up.stdout)
        assert restarted["bootstrap"] == info.bootstrap
        assert restarted["running"] and restarted["pid"] != info.pid

        bootstrap = restarted["bootstrap"]
        assert topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        [record] = _consume(bootstrap, topic, "restart-check", count=1)
        assert record.value() == b"survives restart"

        code, text = _run_cli("local", "down", "--dir", str(kafka.root), "--json")
        assert code == 0, text
        assert [d["pid"] for d in json.loads(text)] == [restarted["pid"]]
        log = (kafka.root / "us-west" / "server.log").read_text()
        assert log.count("Terminating process due to signal SIGTERM") == 2, "a broker was killed, not stopped"
    finally:
        kafka.down()


class _PortSnatchedAfterCheck(LocalKafka):
    """Takes the controller port right after `up` found it free, and lets go once the broker has died of it."""

    def _check_ports_free(self, cluster):  # type: ignore[no-untyped-def]
        super()._check_ports_free(cluster)
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", cluster.controller_port))
        holder.listen()

        def release_when_the_broker_exits() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not _broker_exited(cluster):
                time.sleep(0.1)
            holder.close()

        threading.Thread(target=release_when_the_broker_exits, daemon=True).start()


def _broker_exited(cluster) -> bool:  # type: ignore[no-untyped-def]
    """The broker `up` started has died. Its pid file must be written whole first: read between its
    truncation and its write it is empty, and the port was let go before the broker bound it."""
    try:
        int(cluster.pid_file.read_text())
    except (OSError, ValueError):
        return False
    return running_pid(cluster) is None


def test_up_starts_again_when_a_port_is_taken_between_the_check_and_the_bind(tmp_path: Path) -> None:
    kafka = _PortSnatchedAfterCheck(tmp_path / "race", count=1, base_port=_free_base_port())
    try:
        [info] = kafka.up()
        assert info.running
        console = (kafka.root / "us-west" / "console.log").read_text()
        assert console.count("--- started") == 2 and "BindException" in console
        assert AdminClient({"bootstrap.servers": info.bootstrap}).list_topics(timeout=10) is not None
    finally:
        kafka.down()
