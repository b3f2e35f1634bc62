"""Reading whole partitions back, for record-by-record comparisons in tests."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition

#: A cluster as the helpers take it: its bootstrap address, or a client's whole settings (secured clusters).
Cluster = str | dict


def client_settings(cluster: Cluster) -> dict:
    return {"bootstrap.servers": cluster} if isinstance(cluster, str) else dict(cluster)


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple | None
    timestamp: int
    timestamp_type: int

    def content(self) -> tuple:
        """Everything but the offset."""
        return (self.partition, self.key, self.value, self.headers, self.timestamp, self.timestamp_type)


def read_partition(
    bootstrap: Cluster, topic: str, partition: int, committed_only: bool = True, timeout: float = 60
) -> list[Record]:
    """Every record of a partition from its log start to its current end."""
    cons = Consumer(
        {
            **client_settings(bootstrap),
            "group.id": f"test-reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        low, high = cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        records: list[Record] = []
        if high <= low:
            return records
        cons.assign([TopicPartition(topic, partition, low)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in cons.consume(5000, 0.5):
                assert m.error() is None, m.error()
                if m.offset() >= high:
                    return records
                ts_type, ts = m.timestamp()
                headers = tuple(m.headers()) if m.headers() is not None else None
                records.append(Record(m.partition(), m.offset(), m.key(), m.value(), headers, ts, ts_type))
            if cons.position([TopicPartition(topic, partition)])[0].offset >= high:
                return records
        raise TimeoutError(f"{topic}[{partition}] not read to {high} within {timeout}s")
    finally:
        cons.close()


def read_topic(bootstrap: Cluster, topic: str, partitions: int) -> dict[int, list[Record]]:
    return {p: read_partition(bootstrap, topic, p) for p in range(partitions)}


def assert_identical(source: dict[int, list[Record]], mirror: dict[int, list[Record]]) -> None:
    """Same records, same partitions, same order, same offsets."""
    assert sorted(source) == sorted(mirror)
    for p in source:
        assert len(mirror[p]) == len(source[p]), f"partition {p}: {len(mirror[p])} mirrored of {len(source[p])}"
        for s, m in zip(source[p], mirror[p], strict=True):
            assert m == s, f"partition {p}: source {s} != mirror {m}"


def commit(bootstrap: Cluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for `group` without joining it (the group stays Empty)."""
    c = Consumer({**client_settings(bootstrap), "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def committed(bootstrap: Cluster, group: str, topic: str, partitions: int = 1) -> dict[int, int | None]:
    c = Consumer({**client_settings(bootstrap), "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in got}
    finally:
        c.close()


def load_source(bootstrap: str, topic: str, records: int, partitions: int = 4) -> None:
    """`records` numbered records (a `seq` header) spread over `partitions`, 150 random bytes and the number each."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = os.urandom(150)
    for i in range(records):
        p.produce(
            topic,
            key=b"key-%d" % i,
            value=payload + i.to_bytes(4, "big"),
            partition=i % partitions,
            headers=[("seq", i.to_bytes(4, "big"))],
        )
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def produce_records(bootstrap: Cluster, topic: str, records: list[Record]) -> None:
    """`records` (read from another topic) produced again, content for content, into `topic`."""
    p = Producer({**client_settings(bootstrap), "enable.idempotence": True})
    for r in records:
        headers = list(r.headers) if r.headers is not None else None
        p.produce(topic, key=r.key, value=r.value, headers=headers, timestamp=r.timestamp, partition=r.partition)
    assert p.flush(30) == 0
