"""Helpers the benchmarks share: their own local cluster pair, Kafka admin chores, MirrorMaker 2.

Imported by `throughput.py` and `translation.py`, which put the repository
root on `sys.path` first (they run as plain scripts).
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.local.clusters import LocalKafka
from mirror_pipeline.local.jars import ensure_kafka_jars, java_command
from mirror_pipeline.model.errors import TopicNotFound

REPO = Path(__file__).resolve().parents[1]
MM2_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"

QUIET = logging.getLogger("bench.librdkafka")  # librdkafka chatter, WARNING and up

_T0 = time.monotonic()


def say(message: str) -> None:
    """Progress on stderr, stamped with seconds since the benchmark started."""
    print(f"[{time.monotonic() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


# --- Kafka helpers -------------------------------------------------------------


def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "logger": QUIET})


def create_topic(admin: AdminClient, topic: str, partitions: int, config: dict | None = None) -> None:
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})])
    fut[topic].result(30)
    wait_for_leaders(admin, topic, partitions)


# Topics created per CreateTopics request: Kafka 4's controller refuses a request that would write
# more than 10,000 metadata records (a topic is one, and one per partition).
CREATE_BATCH = 100


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """Many topics, CREATE_BATCH per request, then until the cluster lists them all (`wait_until_listed`)."""
    admin = admin_for(bootstrap)
    for i in range(0, len(names), CREATE_BATCH):
        batch = names[i : i + CREATE_BATCH]
        futures = admin.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=1) for t in batch])
        for fut in futures.values():
            fut.result(60)
    wait_until_listed(admin, names, partitions, "setup")


def wait_for_leaders(admin: AdminClient, topic: str, partitions: int, timeout_s: float = 300) -> None:
    """Wait until every partition has a leader that answers ListOffsets: a single broker makes
    the partitions of a wide topic live over tens of seconds (NOT_LEADER_FOR_PARTITION meanwhile),
    and on 9,900 partitions its metadata named only some of them for more than the two minutes
    `list_offsets` allows a partition it does not know."""
    tps = [(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            kc.list_offsets(admin, tps, "latest", "bench", read_committed=False, timeout=120)  # retries until then
            return
        except TopicNotFound:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1)


def wait_until_listed(
    admin: AdminClient, names: list[str], partitions: int, what: str, timeout_s: float = 180
) -> float:
    """Until the cluster's metadata lists every topic of `names` with `partitions` partitions, and their
    leaders answer; seconds it took. A single broker given thousands of new partitions lists the last
    of them tens of seconds after their creation, and a client asking for the offsets of a topic it
    has not seen yet is told the topic does not exist."""
    start = time.monotonic()
    while True:
        topics = admin.list_topics(timeout=30).topics
        if all(t in topics and len(topics[t].partitions) == partitions for t in names):
            break
        if time.monotonic() - start > timeout_s:
            listed = sum(t in topics for t in names)
            raise SystemExit(f"{what}: {listed} of {len(names)} topics listed after {timeout_s:.0f} s")
        time.sleep(1)
    kc.list_offsets(
        admin, [(t, p) for t in names for p in range(partitions)], "latest", what, read_committed=False, timeout=120
    )
    return time.monotonic() - start


def end_offsets(admin: AdminClient, topic: str, partitions: int, earliest: bool = False) -> list[int]:
    spec = "earliest" if earliest else "latest"
    offs = kc.list_offsets(admin, [(topic, p) for p in range(partitions)], spec, "bench", read_committed=False)
    return [offs[(topic, p)] for p in range(partitions)]


def topic_partition_count(admin: AdminClient, topic: str) -> int | None:
    md = admin.list_topics(topic=topic, timeout=10)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        return None
    return len(meta.partitions)


def warm_up(bootstrap: str, timeout: float = 120.0) -> None:
    """Make a fresh cluster create its group and transaction coordinators' topics now.

    A fresh KRaft cluster creates `__consumer_offsets` and `__transaction_state`
    (50 partitions each) on first use; that one-time cost would otherwise land
    in whichever measurement first uses a group or a transaction.

    The group coordinator is woken by committing an offset with a consumer, not
    by AdminClient.list_consumer_group_offsets: librdkafka 2.16.0 crashes
    (SIGSEGV in rd_kafka_cgrp_op) when that admin call meets a coordinator
    that is still loading.
    """
    tx = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-warm-up-{uuid.uuid4().hex[:8]}", "logger": QUIET}
    )
    tx.init_transactions(timeout)
    tx.flush(5)
    topic = "bench-warm-up"
    admin = admin_for(bootstrap)
    if topic_partition_count(admin, topic) is None:
        create_topic(admin, topic, 1)
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-warm-up", "enable.auto.commit": False, "logger": QUIET}
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()


# --- the benchmark's own clusters ----------------------------------------------


@contextmanager
def local_clusters(root: Path, keep: bool, base_port: int) -> Iterator[LocalKafka]:
    """Two single-node clusters in `root` on `base_port` and `base_port + 10000`, fresh storage.

    Stopped and wiped at the end unless `keep` (the next run then reuses them).
    """
    lk = LocalKafka(root, count=2, base_port=base_port)
    previous = LocalKafka.from_root(root)
    if (previous.count, previous.base_port) != (2, base_port):
        previous.down()  # the root's own clusters, from a run with other ports
    if not any(info.running for info in previous.status()):
        shutil.rmtree(root, ignore_errors=True)  # fresh storage: no topics from earlier runs
    say(f"starting local clusters in {root} (ports {base_port}, {base_port + 10000})")
    try:
        lk.up()
    except Exception:
        lk.down()
        raise
    try:
        yield lk
    finally:
        if keep:
            say(
                f"leaving clusters running: {', '.join(lk.bootstraps)} "
                f"(stop: LocalKafka(Path({str(root)!r}), 2, {base_port}).down())"
            )
        else:
            say("stopping local clusters and deleting their storage")
            lk.down()
            shutil.rmtree(root, ignore_errors=True)


# --- MirrorMaker 2 ----------------------------------------------------------------


def mm2_class_present() -> bool:
    lib = ensure_kafka_jars()
    entry = MM2_CLASS.replace(".", "/") + ".class"
    for jar in lib.glob("connect-mirror-*.jar"):
        with zipfile.ZipFile(jar) as z:
            if entry in z.namelist():
                return True
    return False


#: MM2 on single-node clusters: it creates its remote and internal topics with replication factors above 1.
MM2_SINGLE_NODE = {
    name: "1"
    for name in (
        "replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
        "status.storage.replication.factor",
        "config.storage.replication.factor",
    )
}


def mm2_properties_text(settings: dict[str, str], written_by: str) -> str:
    return f"# Written by {written_by}\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())


def start_mm2(
    workdir: Path,
    properties: str,
    target_cluster: str = "b",
    heap: str = "-Xmx1g -Xms256m",
    jvm_opts: tuple[str, ...] = ("-XX:+UseG1GC", "-Djava.awt.headless=true"),
) -> tuple[subprocess.Popen, Path]:
    """MirrorMaker 2 in dedicated mode for `target_cluster`, in a fresh `workdir`; (process, log path)."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    props = workdir / "mm2.properties"
    props.write_text(properties)
    log_path = workdir / "mm2.log"
    cmd = java_command(MM2_CLASS, str(props), "--clusters", target_cluster, heap=heap, jvm_opts=list(jvm_opts))
    say(f"MM2: starting {MM2_CLASS} (log: {log_path})")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    return proc, log_path


def stop_mm2(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def log_tail(log_path: Path, lines: int = 15) -> str:
    return "\n".join(log_path.read_text(errors="replace").strip().splitlines()[-lines:])
