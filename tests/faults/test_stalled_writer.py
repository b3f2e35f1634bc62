"""A copy task frozen mid-chunk while another cycle settles its partition: nothing it held lands after
(R-REL-2, R-MT-9).

A fence stops a writer's next segment, not the records it already handed to
its producer. What the repair relies on (`chunks.chunk_delivery_timeout_ms`):
a chunk's records land within half of `mirror.writer.fence.wait.ms`, counted
from before its segment was written, or never. Each test freezes a real copy
task (SIGSTOP, in a process of its own as a Spark worker runs it) at one
point of its first chunk, runs a whole cycle meanwhile (it fences the
partition, waits out the fence wait, cuts the stalled segment at what landed
and copies everything itself), then thaws the task. The task must give up
without landing anything more, and the mirror must be its source record for
record, with every offset mapped.
"""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.replication import cycle
from mirror_pipeline.replication.copier import InTurn
from tests.faults.conftest import LINK
from tests.faults.harness import REPO, assert_clean, log_ends, preload, python_cmd

RECORDS = 20_000  # ten chunks of the fault config's 2,000
STOP_TIMEOUT_S = 120


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def start_frozen_task(work_file: Path, point: str, log: Path) -> subprocess.Popen:
    """The task of `work_file` in a process of its own, once it has frozen itself at `point`."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            python_cmd("-m", "tests.faults.stalled_task", str(work_file), point),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while process_state(proc.pid) != "T":
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the task did not reach '{point}': {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.02)
    return proc


def cycle_in_a_frozen_task(
    config, spark, monkeypatch, tmp_path: Path, topic: str, point: str, work_of
) -> subprocess.Popen:
    """Run a cycle of `topic` whose copy job is one task in a process of its own, frozen at `point`;
    `work_of(groups)` is what that task copies (a unit, or a group's units)."""
    tasks = []

    def run_in_a_frozen_task(_spark, groups, ctx, description=""):
        work_file = tmp_path / "work.pickle"
        work_file.write_bytes(pickle.dumps((work_of(groups), ctx)))
        tasks.append(start_frozen_task(work_file, point, tmp_path / "task.log"))
        return []  # as a driver that lost sight of its task

    monkeypatch.setattr(cycle, "run_unit_groups", run_in_a_frozen_task)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    monkeypatch.undo()
    [task] = tasks
    return task


@pytest.mark.parametrize("point", ["announced", "produced"])
def test_a_task_frozen_mid_chunk_lands_nothing_after_another_cycle_settled_it(
    point,
    fault_config,
    spark,
    monkeypatch,
    tmp_path,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
    fault_report,
):
    path = fault_config()
    config = load_config(path)
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    preload(source_bootstrap, topic, 1, RECORDS)
    engine.create_mirror(config, LINK, topic)

    def the_unit(groups):
        [[unit]] = groups
        return unit

    task = cycle_in_a_frozen_task(config, spark, monkeypatch, tmp_path, topic, point, the_unit)
    try:
        # Another cycle settles the frozen chunk (cut at what landed) and copies everything.
        assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
        settled = log_ends(destination_bootstrap, topic, 1)
        assert settled == {0: RECORDS}
    finally:
        task.send_signal(signal.SIGCONT)
    task.wait(120)
    log = (tmp_path / "task.log").read_text(errors="replace")
    assert task.returncode == 0, log
    [result] = json.loads(log.strip().splitlines()[-1])
    # The thawed task gave up: past its chunk's deadline, or fenced at its next one.
    assert result["error"], result

    time.sleep(3)  # a request the task still had in flight would have landed by now
    assert log_ends(destination_bootstrap, topic, 1) == settled, "the frozen task landed records after the settling"
    after = engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert (after.records, after.lag_after) == (0, 0)
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        1,
        complete=True,
        expected_state="ACTIVE",
        report=lambda verdict: fault_report(
            f"stall: a copy task frozen once its chunk was {point}", {"stall": 1}, verdict
        ),
    )


GROUP_PARTITIONS = 4
GROUP_RECORDS = 1_500  # per partition: less than a chunk, so the partitions are copied together


# Records added to partition 0 while the group task is frozen: more than a chunk, so the settling
# cycle copies that partition alone (`copier.copy_unit`), not in a group as the frozen task did.
MOVED_RECORDS = 5_000


@pytest.mark.parametrize(
    ("point", "moved"),
    [("group-announced", False), ("between-partitions", False), ("between-partitions", True)],
    ids=["group-announced", "between-partitions", "between-partitions-then-moved"],
)
def test_a_group_task_frozen_between_its_partitions_lands_nothing_after_another_cycle_settled_them(
    point,
    moved,
    fault_config,
    spark,
    monkeypatch,
    tmp_path,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
    fault_report,
):
    """A task copying small units together (`group_copy`), one writer per slot and one producer for
    all, frozen once the first round is announced, or between two partitions' records of it; with
    `moved`, the settling cycle copies one of its partitions in a task of its own (a partition moving
    between groups: the slot's writer, not the task, is what fences)."""
    path = fault_config()
    config = load_config(path)
    topic = create_topic(source_bootstrap, unique_name(), partitions=GROUP_PARTITIONS)
    source = preload(source_bootstrap, topic, GROUP_PARTITIONS, GROUP_RECORDS)
    engine.create_mirror(config, LINK, topic)

    def every_unit(groups):
        units = [u for g in groups for u in g]
        assert len(units) == GROUP_PARTITIONS and all(u.source_until - u.source_from <= u.chunk_records for u in units)
        return units

    task = cycle_in_a_frozen_task(config, spark, monkeypatch, tmp_path, topic, point, every_unit)
    try:
        expected = GROUP_PARTITIONS * GROUP_RECORDS
        if moved:
            preload(source_bootstrap, topic, 1, MOVED_RECORDS, source=source)  # partition 0 only
            expected += MOVED_RECORDS
            dealt = spy_on_groups(monkeypatch)
        assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
        if moved:
            monkeypatch.undo()
            [with_0] = [g for g in dealt if any(u.partition == 0 for u in g)]
            assert isinstance(with_0, InTurn) or len(with_0) == 1, dealt  # copied alone (`copier.copy_unit`)
        settled = log_ends(destination_bootstrap, topic, GROUP_PARTITIONS)
        assert sum(settled.values()) == expected
    finally:
        task.send_signal(signal.SIGCONT)
    task.wait(120)
    log = (tmp_path / "task.log").read_text(errors="replace")
    assert task.returncode == 0, log
    results = json.loads(log.strip().splitlines()[-1])
    # Every partition the frozen round touched gave up: past the deadline, or fenced.
    assert any(r["error"] for r in results), results

    time.sleep(3)
    assert log_ends(destination_bootstrap, topic, GROUP_PARTITIONS) == settled, (
        "the frozen task landed records after the settling"
    )
    after = engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert (after.records, after.lag_after) == (0, 0)
    assert_clean(
        path,
        LINK,
        source_bootstrap,
        destination_bootstrap,
        topic,
        GROUP_PARTITIONS,
        complete=True,
        expected_state="ACTIVE",
        report=lambda verdict: fault_report(
            f"stall: a group copy task frozen once {point}" + (", the partition then copied alone" if moved else ""),
            {"stall": 1},
            verdict,
        ),
    )


def spy_on_groups(monkeypatch) -> list:
    """The groups the next cycle deals its units to (appended to the list returned)."""
    dealt: list = []
    deal = cycle.cycle_groups

    def recording(units, slots):
        groups = deal(units, slots)
        dealt.extend(groups)
        return groups

    monkeypatch.setattr(cycle, "cycle_groups", recording)
    return dealt
