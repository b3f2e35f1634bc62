"""kill -9 at seeded random moments, on all three kinds of source under a producer that never stops (R-REL-1, R-REL-2).

Each kill point starts a real process and SIGKILLs it at a random moment:
- `cycle`: the whole `mirror-pipeline run` session (driver, JVM, Python workers);
- `driver`: the driver alone, leaving its Spark workers running as possible
  zombie writers while the next cycle starts (they are reaped at the end);
- `worker`: one of Spark's Python workers, mid-copy;
- `dagster`: a Dagster run of the link's copy asset, whole session;
- `follow`: follow mode (`run --follow`, epochs of a few seconds), whole
  session, in start-up, mid-epoch or between epochs;
- `follow-stop`: follow mode stopped by SIGTERM at a random moment, which
  must finish the epoch in flight and exit 0 (a graceful stop loses nothing);
- `follow-worker`: one of follow mode's Python workers, once epochs hand
  over: with epochs of a few seconds, often the task of an epoch finishing
  its last round or the next epoch's task waiting to fence, fencing or
  checking what landed. Follow mode must go on (the next epoch planned in
  full) until it is killed whole.
- `follow-announcing`: follow mode's Python workers, all of them, the moment
  the offset map holds a transaction written and not yet committed: a task
  announcing a round's reservations (closing the ones before), closing
  reservations whose window ended, packing its segments, or the first
  announcement after a hand-over. Follow mode must go on, as above.
A quarter of the kills are followed at once by a second one on the restarted
process. After the last, the producer stops, cycles catch up, and every
record is compared. `make faults` kills nine times per kill kind on every kind
of source (216 kill points); `make test` runs a slice: each kill kind once,
dealt across the three kinds of source (eight kill points).
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from tests.faults.conftest import FULL, LINK
from tests.faults.harness import (
    FOLLOW_EPOCH_S,
    FOLLOW_STOP_S,
    SOURCE_KINDS,
    catch_up,
    compare,
    kill_pids,
    kill_session,
    log_ends,
    mirror_state,
    preload,
    python_workers,
    session_members,
    start_cycle,
    start_dagster_run,
    start_follow,
    topic_config,
    wait_exit,
    wait_for_open_transaction,
    wait_output,
)

KILL_KINDS = ("cycle", "driver", "worker", "dagster", "follow", "follow-stop", "follow-worker", "follow-announcing")
KILLS_PER_KIND = 9 if FULL else 1
PARTITIONS = 4
SEED = int(os.environ.get("MIRROR_PIPELINE_FAULTS_SEED", "20261123"))


def kill_kinds(source_kind: str) -> tuple[str, ...]:
    """The kill kinds one source kind gets: all of them in the full suite, two in the slice (every kill kind once
    across the three: a transactional source gets the worker killed mid-transaction)."""
    if FULL:
        return KILL_KINDS
    return KILL_KINDS[SOURCE_KINDS.index(source_kind) :: len(SOURCE_KINDS)]


STARTERS = {
    "dagster": start_dagster_run,
    "follow": start_follow,
    "follow-stop": start_follow,
    "follow-worker": start_follow,
    "follow-announcing": start_follow,
}
OFFSET_MAP_TOPIC = "_faults.offset-map"  # the fault suite's link's (`conftest.fault_config`)


def lose_workers(started, workers: list[int]) -> bool:
    """Kill follow mode's Python `workers` (False: none to kill). The epoch whose task was lost is reported, and
    the next one planned in full: follow mode must go on, until it is killed whole here."""
    if not workers:
        return False
    kill_pids(workers)
    code = wait_exit(started, 2 * FOLLOW_EPOCH_S)
    assert code is None, f"follow mode ended (exit {code}) when it lost Python workers {workers}:\n{started.output()}"
    kill_session(started)
    return True


def kill_at_random(started, how: str, rng: random.Random, strays: list, destination: str) -> str | None:
    """Kill `started` as `how` says at a random moment; None when it was, else why it could not be."""
    ended = "it ended first"
    no_workers = "it had no Python worker to kill"
    if how == "worker":
        deadline = time.monotonic() + 60
        while not python_workers(started.pid):
            if started.proc.poll() is not None or time.monotonic() > deadline:
                return "no Python worker within 60 s"
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        workers = python_workers(started.pid)
        if not workers:
            return no_workers
        kill_pids([rng.choice(workers)])
        wait_exit(started, 20)  # the cycle fails its unit and ends by itself
        kill_session(started)
        return None
    if how in ("follow-worker", "follow-announcing"):
        # Once the first epoch is recorded the second has taken over: every later moment is near a hand-over,
        # and tasks announce all the time (on a loaded machine the first epoch's tasks can take longer to start
        # than a wait for a transaction would give them).
        if not wait_output(started, "epoch 1:", 120):
            return "no epoch recorded within 120 s"
        time.sleep(rng.uniform(0.0, 2 * FOLLOW_EPOCH_S))
        workers = python_workers(started.pid)  # listed beforehand: a transaction lasts milliseconds
        if how == "follow-worker":
            workers = [rng.choice(workers)] if workers else []
        elif not wait_for_open_transaction(destination, OFFSET_MAP_TOPIC, 60):
            return "no open transaction on the offset map within 60 s"
        else:
            kill_pids(workers)
            workers += python_workers(started.pid)
        return None if lose_workers(started, workers) else no_workers
    if how == "follow-stop":
        # SIGTERM before follow mode is up is no graceful stop (it is a kill, covered above).
        if not wait_output(started, "following link", 90):
            return "not following within 90 s"
        time.sleep(rng.uniform(0.0, 3 * FOLLOW_EPOCH_S))
        started.proc.send_signal(signal.SIGTERM)
        code = wait_exit(started, FOLLOW_STOP_S)
        output = started.stacks() if code is None else started.output()
        assert code == 0, f"follow mode did not stop gracefully on SIGTERM (exit {code}):\n{output}"
        return None
    # A run takes 6-8 s to start Spark: kills land in start-up, planning, copying and recording
    # (follow mode: also mid-epoch and between epochs).
    if wait_exit(started, rng.uniform(0.5, 9.0 if how != "follow" else 9.0 + 3 * FOLLOW_EPOCH_S)) is not None:
        return ended
    if how == "driver":
        kill_pids([started.pid])
        wait_exit(started, 10)
        strays.append(started)
    else:
        kill_session(started)
    return None


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("kind", SOURCE_KINDS)
def test_kill_points_lose_and_duplicate_nothing(
    kind, fault_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, log_dir, fault_report
):
    rng = random.Random(f"{SEED}-{kind}")
    path = fault_config()
    config = load_config(path)
    topic = create_topic(source_bootstrap, unique_name(kind), partitions=PARTITIONS, config=topic_config(kind))
    live = preload(source_bootstrap, topic, PARTITIONS, 5000, kind)
    engine.create_mirror(config, LINK, topic)
    live.start()
    kinds = kill_kinds(kind)
    kills = {k: 0 for k in kinds}
    strays: list = []
    started = []
    misses: list[str] = []
    try:
        i = 0
        while min(kills.values()) < KILLS_PER_KIND:
            how = kinds[i % len(kinds)]
            i += 1
            if kills[how] >= KILLS_PER_KIND:
                continue
            for _attempt in range(2 if rng.random() < 0.25 else 1):  # sometimes twice in quick succession
                proc = STARTERS.get(how, start_cycle)(path, LINK, topic, log_dir)
                started.append(proc)
                missed = kill_at_random(proc, how, rng, strays, destination_bootstrap)
                if missed is None:
                    kills[how] += 1
                else:
                    misses.append(f"{how}: {missed}")
                    kill_session(proc)
            if i > KILLS_PER_KIND * len(kinds) * 4:
                # A mirror that may not be copied leaves no copy task to kill: say so first.
                pytest.fail(
                    f"processes kept ending before they could be killed: {kills} ({'; '.join(misses)}); "
                    f"{mirror_state(path, LINK, topic)} (the live source: {live.transactions} transactions, "
                    f"{live.recoveries} recoveries, last error {live.last_error!r})"
                )
    finally:
        live.stop()
        for proc in started:
            kill_session(proc)
    assert not any(session_members(p.pid) for p in started), "no process of the suite outlives its scenario"

    catch_up(config, spark, topic)
    verdict = compare(
        path, LINK, source_bootstrap, destination_bootstrap, topic, PARTITIONS, complete=True, expected_state="ACTIVE"
    )
    fault_report(f"kill -9 ({kind})", kills, verdict)
    assert sum(log_ends(destination_bootstrap, topic, PARTITIONS).values()) > 0
    assert verdict.clean, verdict.problems
