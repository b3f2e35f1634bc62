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

FOLLOW_S = 30.0
# The writers' delivery timeout is half of it (1 s): a held partition is settled 2 s + 2 s (clock
# skew) after its reservation was written.
FENCE_WAIT_MS = 2000
STALL_S = 3.0
# Under a loaded suite the first stall can fall between two rounds (the task waiting on its
# reservation's write, say), when nothing is in flight to time out: the broker is stopped again.
STALL_ATTEMPTS = 3
HELD_MESSAGE = "holding it at mirror offset"


def _dest_end(bootstrap: str, topic: str) -> int:
    return len(read_partition(bootstrap, topic, 0, committed_only=False, timeout=10))


def _stream(bootstrap: str, topic: str, stop: threading.Event) -> int:
    """A record every 10 ms until `stop`, so that a stall meets rounds in flight; how many."""
    out = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    sent = 0
    while not stop.is_set():
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


def _held(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if HELD_MESSAGE in r.getMessage()]


def _stalled_until_a_round_is_held(local_kafka, caplog) -> None:
    for _ in range(STALL_ATTEMPTS):
        time.sleep(1)
        _stalled(local_kafka, STALL_S)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and not _held(caplog):
            time.sleep(0.1)
        if _held(caplog):
            return


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
    stop_streaming = threading.Event()
    stream = threading.Thread(target=lambda: streamed.append(_stream(source_bootstrap, topic, stop_streaming)))
    stream.start()
    _stalled_until_a_round_is_held(local_kafka, caplog)
    time.sleep(2)  # records after the stall too, copied after the held partition is settled
    stop_streaming.set()
    stream.join()
    task.join(FOLLOW_S + 60)

    assert not task.is_alive()
    [result] = results
    assert not result.error, result.error
    assert not result.left_to_next_epoch
    held = _held(caplog)
    assert held, f"no round timed out: none of {STALL_ATTEMPTS} stalls met a round in flight"
    assert result.rounds_held == len(held)
    total = 40 + streamed[0]
    assert result.records == total - 20, "every record the epoch copied counts once, landed late or not"
    source = read_topic(source_bootstrap, topic, 1)
    assert len(source[0]) == total
    assert_identical(source, read_topic(destination_bootstrap, topic, 1))
    segments = ctx.store.read_segments([topic]).segments[(topic, 0)]
    assert not [s for _, s in segments if s.open], "the held reservation was closed"
    assert resolve_keyed(segments, total).offset_map.dest_end == total
