"""Crash safety and single-writer fencing on the real local pair (R-REL-1, R-REL-2).

Real cycles run as `mirror-pipeline run` processes and are killed with
SIGKILL mid-copy, then restarted at once, more than once; the mirror must end
up identical to the source: no record lost, none duplicated, offsets kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka.clients import watermark
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_store import SegmentWriter
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication.copier import CopyContext, WorkUnit, copy_unit
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, read_topic

PARTITIONS = 4
RECORDS = 200_000
# Small chunks: many segments per partition, so a kill lands between and inside them.
SETTINGS = {"mirror.chunk.max.records": 2000}


def load_source(bootstrap: str, topic: str, records: int = RECORDS, partitions: int = PARTITIONS) -> None:
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


def mirrored(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "progress-probe"})
    try:
        return sum(watermark(c, topic, p)[1] for p in range(partitions))
    finally:
        c.close()


def start_cycle(config_path: Path, topic: str) -> subprocess.Popen:
    """`mirror-pipeline run` in its own process group (the driver, its JVM, its Python workers)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mirror_pipeline",
            "run",
            "--link",
            LINK,
            "--mirror",
            topic,
            "--config",
            str(config_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_when_mirrored(proc: subprocess.Popen, bootstrap: str, topic: str, at_least: int, whole_group: bool) -> int:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        done = mirrored(bootstrap, topic)
        if done >= at_least:
            if whole_group:
                os.killpg(proc.pid, signal.SIGKILL)  # a machine crash: everything dies at once
            else:
                proc.kill()  # only the driver: its Spark workers may live on as zombie writers
            proc.wait(30)
            return done
        if proc.poll() is not None:
            pytest.fail(f"cycle ended before it could be killed: {proc.stdout.read().decode()[-2000:]}")
        time.sleep(0.05)
    pytest.fail("cycle made no progress")


def cleanup_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def loaded_mirror(write_config, source_bootstrap, create_topic, unique_name):
    """(config path, config, topic): a mirror of a loaded source topic, nothing copied yet."""
    config_path = write_config(SETTINGS)
    config = load_config(config_path)
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    load_source(source_bootstrap, topic)
    engine.create_mirror(config, LINK, topic)
    return config_path, config, topic


def copy_until_caught_up(config, spark, topic: str) -> None:
    for _ in range(3):
        if engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0:
            return


def test_kill_9_mid_copy_then_restart_loses_and_duplicates_nothing(
    loaded_mirror, spark, source_bootstrap, destination_bootstrap
):
    config_path, config, topic = loaded_mirror

    kills, outputs = [], []
    for fraction, whole_group in ((0.15, True), (0.45, False), (0.75, True)):
        proc = start_cycle(config_path, topic)  # restarted at once after the previous kill
        try:
            kills.append(kill_when_mirrored(proc, destination_bootstrap, topic, int(RECORDS * fraction), whole_group))
        finally:
            cleanup_group(proc)
            outputs.append(proc.stdout.read().decode(errors="replace")[-3000:])
    assert kills[0] < kills[-1] < RECORDS, f"kills must land mid-copy: {kills}"

    copy_until_caught_up(config, spark, topic)
    source, mirror = (
        read_topic(source_bootstrap, topic, PARTITIONS),
        read_topic(destination_bootstrap, topic, PARTITIONS),
    )
    try:
        assert_identical(source, mirror)
    except AssertionError:
        print(crash_evidence(config, topic, source, mirror, kills, outputs))
        raise


def crash_evidence(config, topic, source, mirror, kills, outputs) -> str:
    """What a failure needs explained: where the mirror first differs, the partition's segments,
    the killed cycles' output."""
    lines = [f"kills at mirrored totals {kills}"]
    segments = LinkContext.open(config, LINK).store.read_segments([topic]).segments
    for p in sorted(source):
        first = next((i for i, (s, m) in enumerate(zip(source[p], mirror[p], strict=False)) if s != m), None)
        if first is None and len(source[p]) == len(mirror[p]):
            continue
        lines.append(
            f"partition {p}: {len(mirror[p])} mirrored of {len(source[p])}, first difference at mirror offset {first}"
        )
        if first is not None:
            lines.append(f"  source seq {source[p][first].headers}, mirror seq {mirror[p][first].headers}")
        for key, seg in sorted(segments.get((topic, p), []), key=lambda kv: kv[1].dest_start):
            lines.append(
                f"  segment {key}: dest {seg.dest_start}..{seg.dest_end} runs {seg.runs[:4]} "
                f"source_end {seg.source_end}"
            )
    lines += [f"--- killed cycle {i} output ---\n{out}" for i, out in enumerate(outputs)]
    return "\n".join(lines)


def test_overlapping_cycles_never_both_write_a_partition(loaded_mirror, spark, source_bootstrap, destination_bootstrap):
    config_path, config, topic = loaded_mirror

    # Started together, both plan the same ranges from the same log ends and
    # their copy tasks race for every partition.
    first, second = start_cycle(config_path, topic), start_cycle(config_path, topic)
    try:
        out_first = first.communicate(timeout=300)[0].decode()
        out_second = second.communicate(timeout=300)[0].decode()
    finally:
        cleanup_group(first)
        cleanup_group(second)

    # The later cycle fenced the earlier one: at least one cycle stopped, saying why.
    assert first.returncode != 0 or second.returncode != 0, out_first[-1500:] + out_second[-1500:]
    failed = out_first if first.returncode else out_second
    assert "another cycle" in failed or "another writer" in failed, failed[-1500:]
    assert "Traceback" not in out_first + out_second
    copy_until_caught_up(config, spark, topic)
    assert_identical(
        read_topic(source_bootstrap, topic, PARTITIONS), read_topic(destination_bootstrap, topic, PARTITIONS)
    )


def test_unit_refuses_when_another_writer_wrote_after_the_plan(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=100, partitions=1)
    engine.create_mirror(config, LINK, topic)
    ctx = LinkContext.open(config, LINK)
    snapshot_end = ctx.store.read_segments([topic]).end_offset
    unit = WorkUnit(LINK, topic, topic, 0, 0, 25, 0, snapshot_end, 1 << 30, 1000, 1048588)
    # Another writer announces a chunk of this partition after the plan was made.
    other = SegmentWriter(ctx.store.dest_properties, LINK, topic, 0, ctx.store.offset_map_topic)
    other.fence()
    other.write(puts=[Segment(0, ((0, 10),), 10)])
    other.close()
    copy_ctx = CopyContext(
        "us-west",
        "us-east",
        dict(ctx.source.properties),
        dict(ctx.dest.properties),
        ctx.store.offset_map_topic,
        3000,
        ctx.store.state_topic,
    )

    result = copy_unit(unit, copy_ctx)

    assert result.error_kind == "ConcurrentWriter", result
    assert result.records == 0
    assert mirrored_partition(destination_bootstrap, topic) == 0


def mirrored_partition(bootstrap, topic):
    return mirrored(bootstrap, topic, partitions=1)


def test_foreign_write_into_a_mirror_is_detected(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=50, partitions=1)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    p = Producer({"bootstrap.servers": destination_bootstrap})
    p.produce(topic, value=b"not from the link", partition=0)
    p.flush(10)
    load_source(source_bootstrap, topic, records=10, partitions=1)

    with pytest.raises(engine.CycleFailed, match="records the link did not write"):
        engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert mirrored_partition(destination_bootstrap, topic) == 51  # nothing interleaved after it
