"""A copy task's memory stays within its budget, whatever the size of the partition (issue #16).

Each test copies one partition several times bigger than the task's budget
(`CopyContext.task_memory_bytes`, the link's `mirror.task.memory.bytes`) through
a real cycle on the local pair, in a Spark Python worker, and checks the peak
resident memory the task reports (`UnitResult.rss_peak_bytes`: the worker's
VmHWM, reset when the task starts): what the task added to the worker stays
within the budget, and the copy is byte for byte. The worker's own memory
when the task starts depends on the tasks it ran before (Spark reuses
workers), so it is only checked against a loose ceiling that a leak across
tasks would break.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror_pipeline import engine
from mirror_pipeline.replication import cycle
from mirror_pipeline.replication.spark_runner import run_unit_groups
from tests.integration.conftest import LINK

MiB = 1024 * 1024
BUDGET = 64 * MiB
# What a Spark Python worker holds before a task (documented in docs/deploying.md, Sizing,
# Performance): the interpreter, PySpark, pyarrow and the pipeline's modules,
# ~90 MiB in a fresh worker, up to ~200 MiB in one reused after many tasks
# (194 MiB was seen after a whole suite's worth). Well past that is a leak.
WORKER_CEILING = 256 * MiB


@pytest.fixture
def budgeted_cycles(monkeypatch):
    """Cycles whose copy tasks get BUDGET; the tasks' results land in the returned list."""
    results = []

    def run_with_budget(spark, groups, ctx, description=""):
        out = run_unit_groups(spark, groups, dataclasses.replace(ctx, task_memory_bytes=BUDGET), description)
        results.extend(out)
        return out

    monkeypatch.setattr(cycle, "run_unit_groups", run_with_budget)
    return results


def load(bootstrap: str, topic: str, records: int, value_bytes: int) -> int:
    """`records` distinct records of `value_bytes` each into partition 0; their key + value bytes."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 256 * 1024,
        }
    )
    body = os.urandom(value_bytes)
    total = 0
    for i in range(records):
        key = b"key-%d" % i
        value = i.to_bytes(8, "big") + body[8:]
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=0, headers=[("seq", i.to_bytes(8, "big"))])
                break
            except BufferError:
                p.poll(0.05)
        total += len(key) + len(value)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return total


def digest(bootstrap: str, topic: str, records: int) -> str:
    """A digest of every record of partition 0 (offset, key, value, headers, timestamp), read as a stream."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"memory-test-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "queued.max.messages.kbytes": 65536,
        }
    )
    h = hashlib.sha256()
    seen = 0
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        while seen < records:
            batch = c.consume(1000, 10)
            assert batch, f"{topic}: only {seen} of {records} records readable"
            for m in batch:
                assert m.error() is None, m.error()
                h.update(repr((m.offset(), m.key(), m.headers(), m.timestamp())).encode())
                h.update(m.value())
            seen += len(batch)
    finally:
        c.close()
    assert seen == records
    return h.hexdigest()


@pytest.mark.parametrize(
    "value_bytes,records",
    [
        pytest.param(998_000, 300, id="1MB-records-300MB"),
        pytest.param(1024, 150_000, id="1KiB-records-150MB"),
    ],
)
def test_a_copy_task_stays_within_its_memory_budget(
    config,
    spark,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
    budgeted_cycles,
    value_bytes,
    records,
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    size = load(source_bootstrap, topic, records, value_bytes)
    assert size > 2 * BUDGET
    engine.create_mirror(config, LINK, topic)

    result = engine.run_cycle(config, LINK, spark, mirrors=[topic])

    assert (result.records, result.bytes, result.lag_after) == (records, size, 0)
    [task] = budgeted_cycles
    assert not task.error, task.error
    figures = (
        f"task RSS at start {task.rss_start_bytes / MiB:.0f} MiB, peak {task.rss_peak_bytes / MiB:.0f} MiB, "
        f"budget {BUDGET / MiB:.0f} MiB, worker ceiling {WORKER_CEILING / MiB:.0f} MiB"
    )
    print(figures)
    assert 0 < task.rss_start_bytes <= task.rss_peak_bytes
    assert task.rss_peak_bytes - task.rss_start_bytes <= BUDGET, figures  # what the task added
    assert task.rss_start_bytes <= WORKER_CEILING, figures  # the worker before the task
    # Replication latency was measured for every record (they all carry a timestamp).
    assert task.latency_records == records and 0 <= task.latency_min_ms <= task.latency_max_ms
    assert digest(source_bootstrap, topic, records) == digest(destination_bootstrap, topic, records)
