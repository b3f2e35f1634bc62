"""A deployment on PostgreSQL heals by itself from a PostgreSQL restart.

The deployment of test_orchestrator (a link with its automation on, lag
sensor every 5 s, under `mirror-pipeline ui`), but its Dagster instance is the
shipped `deploy/dagster-postgres.yaml` on a local PostgreSQL server (a
database of its own, the `DAGSTER_PG_*` variables set for every process as a
deployment sets them). While a replicate run copies, the server restarts in
fast mode: every session of the webserver, the daemon, the code server and
the run worker is dropped, and for a moment no connection is accepted.

No step is taken by hand after it. The run that was copying must end, in
whatever status, saying why in its logs (or finish its copy); a replicate run
started after the restart must succeed; the lag must return to 0; the mirror
is compared record by record with its source; and each of the link's sensors
must have completed a tick started after the restart (the daemon goes on);
and the webserver, whose one pooled connection the restart broke, answers
again after at most a failed request and shows the run as it ended.
The time from the restart to the end of the first good run goes to the fault
report.

What heals it: dagster-postgres holds no connection open between calls (but
the webserver's one pooled connection, which SQLAlchemy replaces once a
request has failed on it) and retries a refused connection for a few seconds,
so a restart that short costs at most a failed daemon iteration, retried on
the next one.
A longer outage makes storage calls fail (tried by hand with the server down
20 s and 90 s): the daemon logs them and goes on, its sensors ticking again
once the server is back; a run worker drops the log lines it cannot write and
copies on, but dies when it cannot record an event of the run itself; that
run stays STARTED until run monitoring finds the worker gone and marks it
failed, saying so, and the link's next run copies on.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import TickStatus

from mirror_pipeline_dagster.naming import LinkNames
from tests.faults.test_orchestrator import (
    RECOVERY_S,
    RUN_START_S,
    TERMINAL,
    Deployment,
    automated_link_config,
    mirror,
    recover,
    serving,
    wait_for_copying_run,
    wait_for_status,
)

__all__ = ["mirror"]  # the fixture, shared with test_orchestrator: a mirror with a backlog, records arriving

LINK = "orchestrator-pg"
NAMES = LinkNames(LINK)
DEPLOY_FILE = Path(__file__).resolve().parents[2] / "deploy" / "dagster-postgres.yaml"
WEBSERVER_TRIES = 10
TICK_WAIT_S = 180  # the link's slowest sensors tick every 30 s
# The events of a run's logs that say how it ended.
FAILED_ENDINGS = {DagsterEventType.RUN_FAILURE, DagsterEventType.RUN_CANCELED, DagsterEventType.STEP_FAILURE}
ENDINGS = FAILED_ENDINGS | {DagsterEventType.ENGINE_EVENT, DagsterEventType.RUN_SUCCESS}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, postgres_server, source_bootstrap, destination_bootstrap) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("orchestrator-pg")
    database = f"orchestrator_pg_{uuid.uuid4().hex[:6]}"
    postgres_server.create_database(database)
    config = automated_link_config(root, source_bootstrap, destination_bootstrap, LINK)
    home = root / "dagster-home"
    home.mkdir()
    shutil.copyfile(DEPLOY_FILE, home / "dagster.yaml")
    # For every process of the deployment (ui passes its environment on) and this one's instance and CLI calls.
    with pytest.MonkeyPatch.context() as env:
        for name, value in postgres_server.dagster_env(database).items():
            env.setenv(name, value)
        with serving(root, config, home, LINK) as deployed:
            yield deployed


@pytest.mark.timeout(RUN_START_S + 2 * RECOVERY_S + TICK_WAIT_S + 300)
def test_a_postgres_restart(deployment, postgres_server, mirror, source_bootstrap, destination_bootstrap, fault_report):
    topic, live = mirror
    instance = deployment.instance
    victim, _ = wait_for_copying_run(instance, destination_bootstrap, topic, LINK)
    assert ui_run_status(deployment.url, victim) == "STARTED"  # as an open UI does: the webserver holds a connection
    restarted_at = time.time()
    postgres_server.restart()  # fast mode: every session ends at once
    # The webserver's pooled connection died with the restart: the first request on it fails (Dagster 1.13 sets
    # no `pool_pre_ping` there: dagster-io/dagster#33879), and SQLAlchemy replaces it; the next one answers.
    failed = webserver_failures_before_answer(deployment.url, victim)
    print(f"the webserver answered after {failed} failed request(s) since the restart")

    ended = wait_for_status(instance, victim, TERMINAL, RECOVERY_S)
    why = how_it_ended(instance, victim)
    print(
        f"the run copying at the restart ended {ended.status.value} {ended_after(instance, victim, restarted_at)}; "
        f"its logs say:\n" + "\n".join(f"{kind.value}: {text}" for kind, text in why)[-3000:]
    )
    if ended.status != DagsterRunStatus.SUCCESS:
        assert any(kind in FAILED_ENDINGS and text.strip() for kind, text in why), (
            f"run {victim} ended {ended.status.value} and its logs say nothing of why: {why}"
        )

    recover(
        deployment,
        None,
        restarted_at,
        (),
        live,
        topic,
        source_bootstrap,
        destination_bootstrap,
        fault_report,
        "PostgreSQL restarted (fast: every connection dropped) while a run copies",
    )
    for sensor in (NAMES.lag_sensor, NAMES.health_sensor, NAMES.auto_create_sensor):
        wait_for_tick_after(instance, sensor, restarted_at, TICK_WAIT_S)
    assert ui_run_status(deployment.url, victim) == ended.status.value


def webserver_failures_before_answer(url: str, run_id: str) -> int:
    """How many requests for the run failed before the webserver answered one (a second apart)."""
    errors = []
    while len(errors) < WEBSERVER_TRIES:
        try:
            ui_run_status(url, run_id)
            return len(errors)
        except (AssertionError, OSError) as exc:  # HTTP 500, or an error in the answer
            errors.append(str(exc)[:300])
            time.sleep(1)
    pytest.fail(f"the webserver answered none of {WEBSERVER_TRIES} requests after the restart: {errors}")


def ui_run_status(url: str, run_id: str) -> str:
    """The run's status as the webserver shows it (its GraphQL API, as the UI's runs page asks)."""
    query = (
        '{ runsOrError(filter: {runIds: ["' + run_id + '"]}) { __typename ... on Runs { results { runId status } } '
        "... on PythonError { message } } }"
    )
    request = urllib.request.Request(
        f"{url}/graphql", data=json.dumps({"query": query}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = json.load(answer)
    runs = (body.get("data") or {}).get("runsOrError") or {}
    assert runs.get("__typename") == "Runs" and runs["results"], (
        f"the webserver could not show run {run_id}: {json.dumps(body)[:3000]}"
    )
    return runs["results"][0]["status"]


def how_it_ended(instance: DagsterInstance, run_id: str) -> list[tuple[DagsterEventType, str]]:
    """(kind, message with its error) of the run's failure, cancellation, success and engine events."""
    said = []
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.event_type not in ENDINGS:
            continue
        error = getattr(event.event_specific_data, "error", None)
        said.append(
            (
                event.event_type,
                (entry.message or event.message or "")
                + (f" [{error.cls_name}: {error.message.strip()}]" if error is not None else ""),
            )
        )
    return said


def ended_after(instance: DagsterInstance, run_id: str, restarted_at: float) -> str:
    record = instance.get_run_record_by_id(run_id)
    return f"{record.end_time - restarted_at:.0f} s after the restart" if record and record.end_time else ""


def wait_for_tick_after(instance: DagsterInstance, sensor: str, after: float, timeout_s: float) -> None:
    """Until `sensor` has completed (skipped or succeeded) a tick that started after `after`."""
    deadline = time.monotonic() + timeout_s
    seen: list = []
    while time.monotonic() < deadline:
        states = [
            s
            for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
            if s.instigator_name == sensor
        ]
        assert states, f"the daemon has no state for sensor {sensor}"
        seen = [t for s in states for t in instance.get_ticks(s.instigator_origin_id, s.selector_id, after=after)]
        if any(t.status in (TickStatus.SUCCESS, TickStatus.SKIPPED) for t in seen):
            return
        time.sleep(2)
    pytest.fail(
        f"sensor {sensor} completed no tick within {timeout_s} s after the restart; ticks after it: "
        + ", ".join(f"{t.status.value} {t.error.message.strip() if t.error else ''}" for t in seen)
    )
