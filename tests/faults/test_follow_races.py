"""Lifecycle verbs racing follow mode (always-on), under a producer that never stops (R-EX-4, R-LC-8).

Follow mode keeps running across the verb: its tasks are mid-epoch when the
verb fences them, and its later epochs must leave a stopped mirror alone and
pick a resumed one up again. It is stopped with SIGTERM at the end, which
must be graceful (exit 0).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from tests.config_files import TEST_FENCE_WAIT_MS
from tests.faults.conftest import LINK
from tests.faults.harness import (
    FOLLOW_EPOCH_S,
    FOLLOW_STOP_S,
    assert_clean,
    kill_session,
    log_ends,
    preload,
    start_follow,
    wait_exit,
)
from tests.faults.test_races import CHUNK, PARTITIONS, wait_until_copying


@contextlib.contextmanager
def following(path, topic: str, dest_bootstrap: str, log_dir):
    """Follow mode copying `topic`: yields once it copies; at the end, SIGTERM and a graceful exit."""
    follower = start_follow(path, LINK, topic, log_dir)
    try:
        wait_until_copying(dest_bootstrap, topic, follower, at_least=1000)
        yield follower
        follower.proc.send_signal(signal.SIGTERM)
        code = wait_exit(follower, FOLLOW_STOP_S)
        assert code == 0, f"follow mode did not stop gracefully (exit {code}): {follower.output()}"
    finally:
        kill_session(follower)


@pytest.fixture
def live_mirror(fault_config, source_bootstrap, create_topic, unique_name):
    """(config path, topic, live producer): a mirror whose source is written all the time."""
    path = fault_config()
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    live = preload(source_bootstrap, topic, PARTITIONS, 2000)
    engine.create_mirror(load_config(path), LINK, topic)
    live.start()
    yield path, topic, live
    live.stop()


def wait_caught_up(config, topic: str, within: int = 500, timeout: float = 120) -> None:
    """Until follow mode's lag on `topic` is below `within` records (a live producer keeps adding some)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine.mirror_lags(config, LINK).get(topic, within) < within:
            return
        time.sleep(0.5)
    pytest.fail(f"follow mode did not catch up on '{topic}' in {timeout:.0f}s")


def drained(config, topic: str, live) -> None:
    """Follow mode caught up with the live producer, which is then stopped, and with its last records."""
    wait_caught_up(config, topic)
    live.stop()
    wait_caught_up(config, topic, within=1)


def test_failover_racing_follow_mode_is_final(
    live_mirror, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic, live = live_mirror
    config = load_config(path)
    with following(path, topic, destination_bootstrap, log_dir):
        result = engine.failover(config, LINK, [topic])
        at_return = log_ends(destination_bootstrap, topic, PARTITIONS)
        time.sleep(3 * FOLLOW_EPOCH_S)  # later epochs plan without the stopped mirror
        assert log_ends(destination_bootstrap, topic, PARTITIONS) == at_return, "records landed after the failover"
    live.stop()
    assert log_ends(destination_bootstrap, topic, PARTITIONS) == at_return
    reported = {int(p): o for p, o in result.mirrors[topic]["last_source_offsets"].items()}
    assert reported == at_return, "the reported stop point must be what the mirror holds (gap-free: its log ends)"
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=False,
        expected_state="STOPPED",
        report=fault_report.race("failover vs follow mode"),
    )


def test_pause_racing_follow_mode_holds_and_resume_is_picked_up(
    live_mirror, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic, live = live_mirror
    config = load_config(path)
    with following(path, topic, destination_bootstrap, log_dir):
        engine.pause(config, LINK, [topic])
        at_pause = log_ends(destination_bootstrap, topic, PARTITIONS)
        time.sleep(3 * FOLLOW_EPOCH_S)
        held = log_ends(destination_bootstrap, topic, PARTITIONS)
        # The pause fenced every partition: at most the chunk a task had announced lands after it.
        assert all(held[p] - at_pause[p] <= CHUNK for p in held), (at_pause, held)
        engine.resume(config, LINK, [topic])
        drained(config, topic, live)  # the follower's next epoch takes the mirror up again
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=True,
        expected_state="ACTIVE",
        report=fault_report.race("pause vs follow mode, then resume"),
    )


# Stalls of the destination broker racing follow mode: each longer than the writers' delivery timeout
# (half the fence wait), so that a round in flight is not acknowledged in time.
STALLS = 3


def test_destination_broker_stalls_racing_follow_mode_lose_and_duplicate_nothing(
    live_mirror, local_kafka, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    """SIGSTOP of the destination broker at random points of follow mode's epochs: rounds in flight
    go unacknowledged and their partitions are held until none of their records can land, then
    settled at what landed (`left_open`); the state topics, on the same broker, stall with it."""
    path, topic, live = live_mirror
    config = load_config(path)
    rng = random.Random()
    with following(path, topic, destination_bootstrap, log_dir):
        pid = local_kafka.status()[1].pid
        for _ in range(STALLS):
            time.sleep(rng.uniform(1.0, FOLLOW_EPOCH_S + 1))
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(rng.uniform(1.2, 2.0) * TEST_FENCE_WAIT_MS / 2000)
            finally:
                os.kill(pid, signal.SIGCONT)
        drained(config, topic, live)
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=True,
        expected_state="ACTIVE",
        report=fault_report.race("destination broker stalled 3 times vs follow mode"),
    )
