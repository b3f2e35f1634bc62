"""A follow-mode task whose destination broker stalls mid-epoch copies on within the epoch (`left_open`).

A round written while the destination broker is stopped (SIGSTOP) is not
acknowledged within the writers' delivery timeout, though its records may
still be written once the broker wakes. The task holds the partition until
none of them can land, checks what landed against the source, closes its
reservation there and copies on: the epoch reports no failure and the mirror
is whole at its end. Before, the partition stopped until the next epoch's
task. The copy runs in this process (no Spark), so the stall can be timed
against the task's rounds.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_map import resolve_keyed
from mirror_pipeline.replication import group_copy
from mirror_pipeline.replication.cycle import copy_context
from mirror_pipeline.replication.planner import plan_cycle
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, load_source, read_partition, read_topic

FOLLOW_S = 24.0
# The writers' delivery timeout is half of it (1 s): a held partition is settled 2 s + 2 s (clock
# skew) after its reservation was written.
FENCE_WAIT_MS = 2000
STALL_S = 3.0


def _dest_end(bootstrap: str, topic: str) -> int:
    return len(read_partition(bootstrap, topic, 0, committed_only=False, timeout=10))


def _stream(bootstrap: str, topic: str, seconds: float) -> int:
    """A record every 10 ms for `seconds`, so that the stall meets rounds in flight; how many."""
    out = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    sent, ends_at = 0, time.monotonic() + seconds
    while time.monotonic() < ends_at:
        out.produce(topic, key=b"stream-%d" % sent, value=os.urandom(100), partition=0)
        out.poll(0)
        sent += 1
        time.sleep(0.01)
    assert out.flush(30) == 0
    return sent


def _stalled(local_kafka, seconds: float) -> None:
    """The destination cluster's broker stopped for `seconds`: it neither answers nor writes."""
    pid = local_kafka.status()[1].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_round_not_acknowledged_holds_its_partition_and_the_epoch_copies_on(
    write_config,
    own_state,
    spark,
    local_kafka,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
    caplog,
):
    config = load_config(write_config({**own_state, "mirror.writer.fence.wait.ms": FENCE_WAIT_MS}))
    topic = unique_name()
    create_topic(source_bootstrap, topic, partitions=1)
    load_source(source_bootstrap, topic, records=20, partitions=1)
    engine.create_mirror(config, LINK, topic)
    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
    ctx = LinkContext.open(config, LINK)
    mirror = [m for m in ctx.registry().values() if m.mirror_topic == topic]
    unit = plan_cycle(ctx, mirror, follow_s=FOLLOW_S).units[0]
    results = []
    task = threading.Thread(target=lambda: results.extend(group_copy.copy_group([unit], copy_context(ctx))))
    caplog.set_level(logging.WARNING, logger="mirror_pipeline.replication.left_open")

    task.start()
    load_source(source_bootstrap, topic, records=20, partitions=1)
    deadline = time.monotonic() + 15
    while _dest_end(destination_bootstrap, topic) < 40:  # the task copies, under a reservation
        assert time.monotonic() < deadline, "the follow-mode task copied nothing"
        time.sleep(0.1)
    # Records that come before, while and after the broker is stopped: a round in flight then waits
    # for acknowledgements that come too late, and the rounds after it are not sent in time.
    streamed: list[int] = []
    stream = threading.Thread(target=lambda: streamed.append(_stream(source_bootstrap, topic, STALL_S + 7)))
    stream.start()
    time.sleep(1)
    _stalled(local_kafka, STALL_S)
    stream.join()
    task.join(FOLLOW_S + 60)

    assert not task.is_alive()
    [result] = results
    assert not result.error, result.error
    assert not result.left_to_next_epoch
    held = [r.getMessage() for r in caplog.records if "holding it at mirror offset" in r.getMessage()]
    assert held, "no round timed out: the stall did not meet a round in flight"
    assert result.rounds_held == len(held)
    total = 40 + streamed[0]
    assert result.records == total - 20, "every record the epoch copied counts once, landed late or not"
    source = read_topic(source_bootstrap, topic, 1)
    assert len(source[0]) == total
    assert_identical(source, read_topic(destination_bootstrap, topic, 1))
    segments = ctx.store.read_segments([topic]).segments[(topic, 0)]
    assert not [s for _, s in segments if s.open], "the held reservation was closed"
    assert resolve_keyed(segments, total).offset_map.dest_end == total
