"""Lifecycle verbs racing a running cycle, and cycles racing each other (R-LC-8, R-REL-1..2, R-MT-9).

The cycles run as real `mirror-pipeline run` processes on `local[2]` (two
task slots) over more partitions than slots, so copy tasks start after the
verb has returned: the case where a stop used to be undone.
"""

from __future__ import annotations

import time

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config import load_config
from tests.faults.conftest import LINK
from tests.faults.harness import compare, kill_session, log_ends, preload, start_cycle, wait_exit

PARTITIONS = 8
PER_PARTITION = 40_000


def wait_until_copying(dest_bootstrap: str, topic: str, started, at_least: int = 10_000, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(e for e in log_ends(dest_bootstrap, topic, PARTITIONS).values() if e > 0) >= at_least:
            return
        if started.proc.poll() is not None:
            pytest.fail(f"the cycle ended before the race: {started.output()}")
        time.sleep(0.05)
    pytest.fail("the cycle copied nothing")


@pytest.fixture
def busy_mirror(fault_config, source_bootstrap, create_topic, unique_name):
    """(config path, topic): a mirror with 8 x 40,000 records to copy."""
    path = fault_config()
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    preload(source_bootstrap, topic, PARTITIONS, PER_PARTITION)
    engine.create_mirror(load_config(path), LINK, topic)
    return path, topic


def test_failover_racing_a_cycle_is_final_and_reports_the_exact_stop_point(busy_mirror, source_bootstrap, destination_bootstrap, log_dir):
    path, topic = busy_mirror
    config = load_config(path)
    cycle = start_cycle(path, LINK, topic, log_dir)
    try:
        wait_until_copying(destination_bootstrap, topic, cycle)

        result = engine.failover(config, LINK, [topic])
        at_return = log_ends(destination_bootstrap, topic, PARTITIONS)

        wait_exit(cycle, 180)
        time.sleep(2)  # anything still in flight would land by now
    finally:
        kill_session(cycle)
    after = log_ends(destination_bootstrap, topic, PARTITIONS)
    assert after == at_return, f"records landed after failover returned: {at_return} -> {after}"
    reported = {int(p): o for p, o in result.mirrors[topic]["last_source_offsets"].items()}
    assert reported == at_return, "the reported stop point must be what the mirror holds (gap-free: its log ends)"
    assert sum(at_return.values()) < PARTITIONS * PER_PARTITION, "the failover must land mid-copy"
    verdict = compare(path, LINK, source_bootstrap, destination_bootstrap, topic, PARTITIONS, complete=False,
                      expected_state="STOPPED")
    assert verdict.clean, verdict.problems
