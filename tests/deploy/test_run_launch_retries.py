"""A run whose launch the code server did not confirm in time goes back into the queue (deploy/dagster.yaml).

The daemon's own dequeue, on an instance loaded from the shipped file: the run launcher fails the way
Dagster's does when the code server's StartRun outlasts the gRPC timeout (as it did on a loaded CI
machine, which failed a follow run before it started). No code server, no Kafka.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.errors import DagsterUserCodeUnreachableError
from dagster._core.events import DagsterEvent
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._core.test_utils import create_run_for_test
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

from mirror_pipeline_dagster.naming import FOLLOW_TAG, LINK_TAG, LinkNames

DEPLOY_FILE = Path(__file__).resolve().parents[2] / "deploy" / "dagster.yaml"
NAMES = LinkNames("west-to-east")
TIMED_OUT = "User code server request timed out due to taking longer than 60 seconds to complete."


@pytest.fixture
def instance(tmp_path: Path):
    home = tmp_path / "dagster-home"
    home.mkdir()
    shutil.copyfile(DEPLOY_FILE, home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)) as loaded:
        yield loaded


def queued_follow_run(instance: dg.DagsterInstance) -> str:
    """A follow run as the webserver queues it: with its code location and its enqueue event."""
    origin = RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("mirror-pipeline"), "__repository__")
    run = create_run_for_test(
        instance,
        job_name=NAMES.follow_job,
        tags={LINK_TAG: "west-to-east", FOLLOW_TAG: "west-to-east"},
        status=dg.DagsterRunStatus.QUEUED,
        remote_job_origin=origin.get_job_origin(NAMES.follow_job),
    )
    instance.report_dagster_event(DagsterEvent.job_enqueue(run), run_id=run.run_id)
    return run.run_id


def dequeue(daemon: QueuedRunCoordinatorDaemon, instance: dg.DagsterInstance, run_id: str, now: float) -> bool:
    """The daemon's own dequeue of the run at time `now`: whether it was handed to the run launcher."""
    run = instance.get_run_by_id(run_id)
    assert run is not None
    workspace = None  # only the run launcher reads it, and the tests replace the launcher's launch_run
    return daemon._dequeue_run(instance, workspace, run, instance.get_concurrency_config(), now)  # type: ignore[arg-type]


def test_a_launch_that_timed_out_is_queued_again_until_the_retries_are_spent(instance, monkeypatch) -> None:
    run_id = queued_follow_run(instance)
    launches: list[str] = []

    def timed_out(context) -> None:
        launches.append(context.dagster_run.run_id)
        raise DagsterUserCodeUnreachableError(TIMED_OUT)

    monkeypatch.setattr(instance.run_launcher, "launch_run", timed_out)
    queue = instance.get_concurrency_config()
    retries = queue.run_queue_config.max_user_code_failure_retries
    delay = queue.run_queue_config.user_code_failure_retry_delay
    assert retries >= 3 and 0 < delay <= 30  # a follow run is back within a minute or so, not failed at once

    now = 1_800_000_000.0
    with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
        for attempt in range(retries):
            assert not dequeue(daemon, instance, run_id, now)
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.QUEUED, f"after try {attempt + 1}"
            # The code location gets the delay to recover: no launch is tried before it has passed.
            assert not dequeue(daemon, instance, run_id, now + 1)
            assert len(launches) == attempt + 1
            now += delay + 1
        assert not dequeue(daemon, instance, run_id, now)

    assert len(launches) == retries + 1
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
    said = [entry.message or "" for entry in instance.all_logs(run_id)]
    assert sum("re-submitting the run into the queue" in line for line in said) == retries
    assert any(f"after {retries} attempts, failing run" in line for line in said)


def test_a_launch_that_timed_out_once_starts_on_the_next_try(instance, monkeypatch) -> None:
    run_id = queued_follow_run(instance)
    outcomes = iter([DagsterUserCodeUnreachableError(TIMED_OUT), None])

    def launch(context) -> None:
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(instance.run_launcher, "launch_run", launch)
    queue = instance.get_concurrency_config()
    delay = queue.run_queue_config.user_code_failure_retry_delay
    with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
        assert not dequeue(daemon, instance, run_id, 1_800_000_000.0)
        assert dequeue(daemon, instance, run_id, 1_800_000_001.0 + delay)
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTING  # handed to the launcher
