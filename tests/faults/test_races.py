"""Lifecycle verbs racing a running cycle, and cycles racing each other (R-LC-8, R-REL-1..2, R-MT-9).

The cycles run as real `mirror-pipeline run` processes on `local[2]` (two
task slots) over more partitions than slots. Each unit copies many chunks, so
`task_groups` deals them in turn to one task per slot: most units start
copying after the verb has returned, the case where a stop used to be undone.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.config.setting_values import MIN_TASK_MEMORY_BYTES
from mirror_pipeline.link.context import LinkContext
from tests.faults.conftest import FULL, LINK
from tests.faults.harness import (
    assert_clean,
    catch_up,
    kill_pids,
    kill_session,
    log_ends,
    preload,
    start_cycle,
    wait_exit,
)

PARTITIONS = 8
PER_PARTITION = 30_000 if FULL else 20_000
CHUNK = 2000  # mirror.chunk.max.records of the fault config
MID_COPY = 10_000  # records landed before most races start


def wait_until_copying(
    dest_bootstrap: str, topic: str, started, at_least: int = MID_COPY, timeout: float = 120
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(e for e in log_ends(dest_bootstrap, topic, PARTITIONS).values() if e > 0) >= at_least:
            return
        if started.proc.poll() is not None:
            pytest.fail(f"the cycle ended before the race: {started.output()}")
        time.sleep(0.05)
    pytest.fail("the cycle copied nothing")


@contextlib.contextmanager
def racing_cycle(path, topic: str, dest_bootstrap: str, log_dir, at_least: int = MID_COPY):
    """A `mirror-pipeline run` copying `topic`: yields once `at_least` records landed, then waits for its end
    and reaps it."""
    cycle = start_cycle(path, LINK, topic, log_dir)
    try:
        wait_until_copying(dest_bootstrap, topic, cycle, at_least)
        yield cycle
        wait_exit(cycle, 180)
        time.sleep(2)  # anything still in flight would land by now
    finally:
        kill_session(cycle)


@pytest.fixture
def per_partition() -> int:
    """Records the busy mirror's partitions hold; a race that needs a longer copy parametrizes it."""
    return PER_PARTITION


@pytest.fixture
def busy_mirror(fault_config, per_partition, source_bootstrap, create_topic, unique_name):
    """(config path, topic): a mirror with 8 partitions of records to copy, more than two task slots take at once."""
    path = fault_config({"mirror.task.memory.bytes": MIN_TASK_MEMORY_BYTES})
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    preload(source_bootstrap, topic, PARTITIONS, per_partition)
    engine.create_mirror(load_config(path), LINK, topic)
    return path, topic


# Twice the records, as the pause race has: under `make test`'s load a failover's eight fences once took
# longer than a cycle needed for all 160,000 records of the default, and the race landed after the copy.
@pytest.mark.parametrize("per_partition", [2 * PER_PARTITION])
def test_failover_racing_a_cycle_is_final_and_reports_the_exact_stop_point(
    busy_mirror, per_partition, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic = busy_mirror
    config = load_config(path)
    # As soon as the first chunk lands, so that the race lands mid-copy.
    with racing_cycle(path, topic, destination_bootstrap, log_dir, at_least=CHUNK):
        result = engine.failover(config, LINK, [topic])
        at_return = log_ends(destination_bootstrap, topic, PARTITIONS)
    after = log_ends(destination_bootstrap, topic, PARTITIONS)
    assert after == at_return, f"records landed after failover returned: {at_return} -> {after}"
    reported = {int(p): o for p, o in result.mirrors[topic]["last_source_offsets"].items()}
    assert reported == at_return, "the reported stop point must be what the mirror holds (gap-free: its log ends)"
    assert sum(at_return.values()) < PARTITIONS * per_partition, "the failover must land mid-copy"
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=False,
        expected_state="STOPPED",
        report=fault_report.race("failover vs a running cycle"),
    )


# Twice the records of the other races: a pause fences the eight partitions one by one (2.5-3.5 s
# here), and a cycle has copied all 160,000 records of the default in that time.
@pytest.mark.parametrize("per_partition", [2 * PER_PARTITION])
def test_pause_racing_a_cycle_stays_paused_and_copying_resumes_exactly(
    busy_mirror, per_partition, spark, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic = busy_mirror
    config = load_config(path)
    with racing_cycle(path, topic, destination_bootstrap, log_dir, at_least=CHUNK) as cycle:
        engine.pause(config, LINK, [topic])
        at_pause = log_ends(destination_bootstrap, topic, PARTITIONS)
    assert cycle.proc.returncode == 0, f"a pause is not a failure of the cycle: {cycle.output()}"
    # The pause fenced every partition: at most the chunk a task had already
    # announced lands after it returned, and no task starts a new one.
    after = log_ends(destination_bootstrap, topic, PARTITIONS)
    assert all(after[p] - at_pause[p] <= CHUNK for p in after), (at_pause, after)
    assert sum(after.values()) < PARTITIONS * per_partition, f"the pause must land mid-copy: {at_pause}"
    assert_clean(
        path, LINK, source_bootstrap, destination_bootstrap, topic, PARTITIONS, complete=False, expected_state="PAUSED"
    )

    engine.resume(config, LINK, [topic])
    catch_up(config, spark, topic)
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=True,
        expected_state="ACTIVE",
        report=fault_report.race("pause vs a running cycle, then resume"),
    )


def test_promote_racing_a_scheduled_cycle_stops_at_zero_lag_for_good(
    busy_mirror, spark, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic = busy_mirror
    config = load_config(path)
    with racing_cycle(path, topic, destination_bootstrap, log_dir):
        result = engine.promote(config, LINK, spark, [topic], timeout_s=300)
        at_return = log_ends(destination_bootstrap, topic, PARTITIONS)
    assert result.mirrors[topic]["after"] == "STOPPED"
    assert (
        log_ends(destination_bootstrap, topic, PARTITIONS) == at_return == {p: PER_PARTITION for p in range(PARTITIONS)}
    )
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=True,
        expected_state="STOPPED",
        report=fault_report.race("promote vs a scheduled cycle"),
    )


def test_two_cycles_started_at_once_never_both_write_a_partition(
    busy_mirror, spark, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic = busy_mirror
    first, second = start_cycle(path, LINK, topic, log_dir), start_cycle(path, LINK, topic, log_dir)
    try:
        codes = wait_exit(first, 300), wait_exit(second, 300)
    finally:
        kill_session(first)
        kill_session(second)
    outputs = first.output(20000), second.output(20000)
    assert "Traceback" not in "".join(outputs)
    # Both planned the same ranges: the later one fenced the earlier, which stopped saying why.
    stopped = [out for code, out in zip(codes, outputs, strict=True) if code != 0]
    assert stopped, f"neither cycle was fenced (exits {codes}):\n" + "\n".join(out[-1500:] for out in outputs)
    assert all("another cycle" in out or "another writer" in out for out in stopped), stopped[0][-1500:]
    catch_up(load_config(path), spark, topic)
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=True,
        expected_state="ACTIVE",
        report=fault_report.race("two cycles at once"),
    )


def test_a_cycle_started_while_a_failover_runs_writes_nothing_after_it(
    busy_mirror, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic = busy_mirror
    config = load_config(path)
    first = start_cycle(path, LINK, topic, log_dir)
    second = None
    try:
        wait_until_copying(destination_bootstrap, topic, first)
        outcome = {}
        failover = threading.Thread(target=lambda: outcome.update(result=engine.failover(config, LINK, [topic])))
        failover.start()
        second = start_cycle(path, LINK, topic, log_dir)
        failover.join(300)
        at_return = log_ends(destination_bootstrap, topic, PARTITIONS)
        wait_exit(first, 180)
        wait_exit(second, 180)
        time.sleep(2)
    finally:
        kill_session(first)
        if second is not None:
            kill_session(second)
    assert log_ends(destination_bootstrap, topic, PARTITIONS) == at_return
    reported = {int(p): o for p, o in outcome["result"].mirrors[topic]["last_source_offsets"].items()}
    assert reported == at_return
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=False,
        expected_state="STOPPED",
        report=fault_report.race("a cycle started during a failover"),
    )


def test_a_stray_worker_of_a_killed_driver_is_harmless(
    busy_mirror, spark, source_bootstrap, destination_bootstrap, log_dir, fault_report
):
    path, topic = busy_mirror
    first = start_cycle(path, LINK, topic, log_dir)
    second = None
    try:
        wait_until_copying(destination_bootstrap, topic, first)
        kill_pids([first.pid])  # the driver alone: its Spark workers may go on writing
        second = start_cycle(path, LINK, topic, log_dir)
        wait_exit(second, 300)
    finally:
        kill_session(first)
        if second is not None:
            kill_session(second)
    catch_up(load_config(path), spark, topic)
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=True,
        expected_state="ACTIVE",
        report=fault_report.race("a stray worker of a killed driver"),
    )


def test_delete_racing_a_cycle_is_final_and_leaves_no_map_or_topic(
    busy_mirror, source_bootstrap, destination_bootstrap, admin, log_dir
):
    path, topic = busy_mirror
    config = load_config(path)
    with racing_cycle(path, topic, destination_bootstrap, log_dir) as cycle:
        engine.delete_mirrors(config, LINK, [topic])
    assert cycle.proc.returncode == 0, f"a delete is not a failure of the cycle: {cycle.output()}"
    ctx = LinkContext.open(config, LINK)
    assert topic not in ctx.registry()
    assert ctx.store.read_segments([topic]).segments == {}, "segments of the deleted mirror were left in the map"
    # No writer still flushing brought the topic back (a producer asks the broker to auto-create by default).
    assert topic not in admin(destination_bootstrap).list_topics(timeout=10).topics
    assert sum(log_ends(source_bootstrap, topic, PARTITIONS).values()) == PARTITIONS * PER_PARTITION
