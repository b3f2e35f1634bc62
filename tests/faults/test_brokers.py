"""kill -9 of a broker mid-copy, then its restart: the destination's, then the source's (R-REL-1)."""

from __future__ import annotations

import os
import signal
import time

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from tests.faults.conftest import FULL, LINK
from tests.faults.harness import (
    catch_up,
    compare,
    kill_session,
    log_ends,
    preload,
    start_cycle,
    topic_config,
    wait_exit,
)

PARTITIONS = 4
BACKLOG = 60_000 if FULL else 20_000  # per partition, so that a kill lands mid-copy


def kill_broker_mid_copy(local_kafka, index: int, path, topic: str, dest_bootstrap: str, log_dir) -> None:
    before = sum(log_ends(dest_bootstrap, topic, PARTITIONS).values())
    cycle = start_cycle(path, LINK, topic, log_dir)
    try:
        deadline = time.monotonic() + 120
        while sum(e for e in log_ends(dest_bootstrap, topic, PARTITIONS).values() if e > 0) <= before:
            assert cycle.proc.poll() is None, f"the cycle ended before the broker was killed: {cycle.output()}"
            assert time.monotonic() < deadline, "the cycle copied nothing"
            time.sleep(0.05)
        pid = local_kafka.status()[index].pid
        os.kill(pid, signal.SIGKILL)
        time.sleep(2)
        local_kafka.up()  # the same storage, restarted
        wait_exit(cycle, 180)
    finally:
        kill_session(cycle)


def test_broker_kills_mid_copy_lose_and_duplicate_nothing(
    fault_config,
    spark,
    local_kafka,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
    log_dir,
    fault_report,
):
    path = fault_config()
    config = load_config(path)
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS, config=topic_config("transactional"))
    live = preload(source_bootstrap, topic, PARTITIONS, BACKLOG, "transactional")
    engine.create_mirror(config, LINK, topic)
    live.start()
    try:
        kill_broker_mid_copy(local_kafka, 1, path, topic, destination_bootstrap, log_dir)  # destination
        preload(source_bootstrap, topic, PARTITIONS, BACKLOG // 2, source=live)
        kill_broker_mid_copy(local_kafka, 0, path, topic, destination_bootstrap, log_dir)  # source
    finally:
        live.stop()
    catch_up(config, spark, topic)
    verdict = compare(
        path, LINK, source_bootstrap, destination_bootstrap, topic, PARTITIONS, complete=True, expected_state="ACTIVE"
    )
    fault_report("broker kill -9 (transactional)", {"destination broker": 1, "source broker": 1}, verdict)
    assert verdict.clean, verdict.problems
