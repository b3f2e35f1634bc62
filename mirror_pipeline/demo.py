"""The Quickstart demo: a local Kafka pair, a link, a mirrored topic, compared.

Everything it does a user can do by hand with the CLI; it exists so that one
command on a fresh machine shows the product working end to end.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.local.clusters import LocalKafka
from mirror_pipeline.model.offset_results import OffsetSyncResult
from mirror_pipeline.model.results import CycleResult
from mirror_pipeline.replication.spark_runner import spark_session

LINK = "west-to-east"
TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 3
MARKER = "# Written by `mirror-pipeline demo`"


@dataclass(frozen=True)
class DemoResult:
    config_path: Path
    topic: str
    source_records: int
    mirror_records: int
    identical: bool
    mismatch: str
    # Per partition: (source committed offset, where the group landed on us-east).
    group_offsets: dict[int, tuple[int, int | None]]
    # What the copy and the offset sync returned, for the CLI to record in Dagster.
    cycle: CycleResult | None = None
    offset_sync: OffsetSyncResult | None = None


def write_demo_config(path: Path, west: str, east: str) -> None:
    """The demo's mirror.yaml; an existing file not written by the demo is never replaced."""
    if path.exists() and MARKER not in path.read_text():
        return
    data = {
        "clusters": {"us-west": {"bootstrap.servers": west}, "us-east": {"bootstrap.servers": east}},
        "links": {
            LINK: {
                "source": "us-west",
                "destination": "us-east",
                "consumer.offset.sync.enable": True,
                "consumer.offset.group.filters": {"groupFilters": [{"name": GROUP, "patternType": "LITERAL"}]},
            }
        },
        "spark": {"conf": {}},  # in this process, two task slots per core
    }
    path.write_text(
        f"{MARKER}; edit freely and remove this line to keep your edits.\n" + yaml.safe_dump(data, sort_keys=False)
    )


def demo_topic(config) -> str:
    """`orders`, unless an earlier demo's mirror of it was promoted or failed over: then `orders-2`, ..."""
    mirrors = {m.mirror_topic: m.state for m in engine.list_mirrors(config, LINK)}
    name, n = TOPIC, 1
    while mirrors.get(name, "ACTIVE") != "ACTIVE":
        n += 1
        name = f"{TOPIC}-{n}"
    return name


def produce_orders(bootstrap: str, count: int, topic: str = TOPIC) -> None:
    """Orders with keys, headers (a repeated key, binary values), nulls and timestamps."""
    admin = kc.admin_client({"bootstrap.servers": bootstrap})
    if kc.topic_partitions(admin, topic, "us-west") is None:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "queue.buffering.max.messages": 1_000_000})
    now = int(time.time() * 1000)
    for i in range(count):
        order = uuid.uuid4().hex
        producer.produce(
            topic,
            key=f"customer-{i % 97}".encode(),
            value=None if i % 500 == 499 else f'{{"order":"{order}","amount":{i % 1000}}}'.encode(),
            headers=[("source", b"demo"), ("trace", os.urandom(8)), ("trace", os.urandom(8))],
            timestamp=now - (count - i),
        )
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def compare(config, link: str, topic: str = TOPIC) -> tuple[int, int, str]:
    """Read both sides in full and compare offset, key, value, headers, timestamp and its type."""
    cfg_link = config.link(link)
    src = kc.client_config(config.cluster(cfg_link.source).properties, link, "state-reader")
    dst = kc.client_config(config.cluster(cfg_link.destination).properties, link, "state-reader")
    total_src = total_dst = 0
    for p in range(PARTITIONS):
        a, b = _read(src, topic, p), _read(dst, topic, p)
        total_src, total_dst = total_src + len(a), total_dst + len(b)
        for x, y in zip(a, b, strict=False):  # the common part; the totals tell the rest
            if x != y:
                return total_src, total_dst, f"partition {p} offset {x[0]} differs"
        if len(a) != len(b):
            return total_src, total_dst, f"partition {p}: {len(b)} mirrored of {len(a)}"
    return total_src, total_dst, ""


def _read(conf: dict, topic: str, partition: int) -> list[tuple]:
    cons = kc.consumer({**conf, "group.id": f"demo-compare-{uuid.uuid4().hex[:6]}"})
    try:
        low, high = kc.watermark(cons, topic, partition)
        cons.assign([TopicPartition(topic, partition, low)])
        rows: list[tuple] = []
        while len(rows) < high - low:
            for m in cons.consume(10_000, 1.0):
                rows.append((m.offset(), m.key(), m.value(), m.headers(), m.timestamp()))
        return rows
    finally:
        cons.close()


def commit_group(bootstrap: str, topic: str, positions: dict[int, int]) -> None:
    """A consumer group that read part of each partition (committed without joining the group)."""
    cons = kc.consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        cons.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
    finally:
        cons.close()


def landed_offsets(config, topic: str) -> dict[int, int | None]:
    """The demo group's committed offsets on the destination."""
    dest = config.cluster(config.link(LINK).destination)
    cons = kc.consumer(kc.client_config(dest.properties, LINK, "state-reader", **{"group.id": GROUP}))
    try:
        got = cons.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=kc.REQUEST_TIMEOUT_S)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in got}
    finally:
        cons.close()


def run_demo(config_path: Path, records: int, say: Callable[[str], None], progress=None) -> DemoResult:
    kafka = LocalKafka.from_root()
    say(f"1/6 starting two local Apache Kafka clusters under {kafka.root} ...")
    west, east = [c.bootstrap for c in kafka.up()][:2]
    say(f"    us-west at {west}, us-east at {east}")
    write_demo_config(config_path, west, east)
    config = load_config(config_path)
    say(f"2/6 link '{LINK}' (us-west -> us-east) declared in {config_path}")
    topic = demo_topic(config)
    say(f"3/6 producing {records:,} orders into '{topic}' on us-west ...")
    produce_orders(west, records, topic)
    info = engine.create_mirror(config, LINK, topic)
    say(f"4/6 mirror topic '{info.mirror_topic}' on us-east; copying with one Spark micro-batch ...")
    spark = spark_session(config.spark)
    result = engine.run_cycle(config, LINK, spark, mirrors=[topic], progress=progress)
    say(
        f"    copied {result.records:,} records ({result.bytes:,} bytes) in {result.duration_s:.1f}s, "
        f"lag after {result.lag_after}"
    )
    say("5/6 comparing source and mirror record by record ...")
    n_src, n_dst, mismatch = compare(config, LINK, topic)
    # A group that read 60% of each partition on us-west resumes at the same place on us-east.
    source_admin = kc.admin_client({"bootstrap.servers": west})
    ends = kc.list_offsets(source_admin, [(topic, p) for p in range(PARTITIONS)], "latest", "us-west")
    positions = {p: ends[(topic, p)] * 3 // 5 for p in range(PARTITIONS)}
    say(f"6/6 consumer group '{GROUP}' committed on us-west at {positions}; syncing its offsets ...")
    commit_group(west, topic, positions)
    synced = engine.sync_offsets(config, LINK, [topic])
    landed = landed_offsets(config, topic)
    return DemoResult(
        config_path,
        topic,
        n_src,
        n_dst,
        not mismatch,
        mismatch,
        {p: (positions[p], landed.get(p)) for p in range(PARTITIONS)},
        result,
        synced,
    )
