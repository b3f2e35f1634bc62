"""The orchestrator's own faults: what runs the copy dies, and the link's automation heals by itself.

A link with its automation on (replicate schedule, lag sensor every 5 s) runs
under `mirror-pipeline ui`, as a deployment runs it, with the project's
instance settings (`deploy/dagster.yaml`: run monitoring, the monitored run
launcher, one run per link). Each test gives the link a mirror with a backlog,
keeps records arriving, and injects one fault:

- the run worker of a replicate run is killed (-9) while it copies;
- the code server and its run workers are killed (-9, its whole process
  group, as the OOM killer or a container restart takes them) while a run
  copies: `ui` starts it again; nobody is left to report the run's end, only
  run monitoring can;
- the daemon is killed (-9): `ui` starts it again, and its sensors and queue
  go on.

No step is taken by hand after the fault. The run that was copying must end
FAILURE, saying why; a replicate run started after the fault must succeed;
the lag must return to 0; and the mirror is compared record by record with
its source (nothing lost, nothing twice). The time from the fault to the end
of the first good run after it goes to the fault report at the end of the run.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster_graphql import DagsterGraphQLClient

from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.run_launcher import process_alive, run_worker
from tests.cli_process import UiProcess, run_cli
from tests.config_files import write_pair_config
from tests.faults.harness import LiveSource, assert_clean, log_ends, preload
from tests.kafka_tools import WriteQuota
from tests.ports import free_port

LINK = "orchestrator"
PARTITIONS = 4
BACKLOG = 30_000  # per partition: a run is still copying when the fault hits (with the write quota below)
# Bytes a second the link's mirror writers may produce to the destination until the fault: a broker
# quota on their client id. Unthrottled, a run copied the whole backlog (~23 MB) between two of the tests'
# polls; a broker lets a new client write about ten seconds of its quota at once, so the quota is low,
# and lifted at the fault (the writers throttled at this rate would not catch up with the source).
WRITE_QUOTA_BYTES_S = 512 * 1024
RATE = 400  # records a second, all along
UI_START_S = 300
RUN_START_S = 300  # the lag sensor's tick, the queue, the worker's Spark session
RECOVERY_S = 600  # a generous bound for the waits: the time taken is what is reported
FOLLOW_EPOCH_S = 5
FENCE_WAIT_MS = 32_000  # see `automated_link_config`
COPIED_IN_EPOCH = re.compile(r"epoch \d+: copied ([\d,]+) records")  # follow mode's line for each epoch
TERMINAL = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


class Deployment:
    def __init__(self, config: Path, home: Path, ui: UiProcess, instance: DagsterInstance, link: str = LINK):
        self.config, self.home, self.ui, self.instance, self.link = config, home, ui, instance, link
        self.url = ""
        self.write_quota: WriteQuota | None = None  # on the link's mirror writers: `mirror` puts it, `recover` lifts it

    def child_pid(self, marker: str) -> int:
        """The process id of the `ui` child whose command line holds `marker`."""
        found = children_running(self.ui.proc.pid, marker)
        assert found, f"no child of mirror-pipeline ui runs {marker!r}"
        return found[0]


def automated_link_config(root: Path, source_bootstrap: str, destination_bootstrap: str, link: str) -> Path:
    """The link with its automation on and a 5 s lag sensor, on internal topics of its own.

    Its fence wait is twice the default, where the other tests' is shorter: a broker throttling a writer (the
    quota of `WRITE_QUOTA_BYTES_S`) holds the requests it already sent for the throttle time, and a request
    held past the fence wait lands after the repair. The next cycle maps its records, the source's next ones,
    but when a cycle copied on before they landed they lie behind its records, and the mirror is flagged
    FOREIGN_WRITE (docs/how-it-works.md). The default of 16 s did not always cover it on a loaded machine,
    likely: a CI run's follow-run-worker test left a mirror lagging 600 s (it did not say why), and 4 s did
    the same under load, the mirror flagged, before late records were mapped."""
    own_topics = {
        f"mirror.{kind}.topic": f"_{link}.{kind.replace('.', '-')}" for kind in ("state", "offset.map", "checkpoints")
    }
    return write_pair_config(
        root / "mirror.yaml",
        source_bootstrap,
        destination_bootstrap,
        link,
        {**own_topics, "dagster.automation.running": True, "dagster.lag.sensor.interval.seconds": 5},
        defaults={"mirror.chunk.max.records": 2000, "mirror.writer.fence.wait.ms": FENCE_WAIT_MS},
    )


@contextlib.contextmanager
def serving(root: Path, config: Path, home: Path, link: str) -> Iterator[Deployment]:
    """`mirror-pipeline ui` on `home`, until the block ends."""
    ui = UiProcess(config, home, free_port(), root / "ui.log")
    try:
        url = ui.wait_until_serving(UI_START_S)
        with DagsterInstance.from_config(str(home)) as instance:
            deployed = Deployment(config, home, ui, instance, link)
            deployed.url = url
            yield deployed
    finally:
        code, output = ui.stop(120)
        print(f"mirror-pipeline ui exited {code}; its log: {ui.log}")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, source_bootstrap, destination_bootstrap) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("orchestrator")
    config = automated_link_config(root, source_bootstrap, destination_bootstrap, LINK)
    with serving(root, config, ensure_dagster_home(root / "dagster-home"), LINK) as deployed:
        yield deployed


@pytest.fixture
def mirror(deployment, source_bootstrap, destination_bootstrap, create_topic):
    """A mirror of a new topic with a backlog, records arriving all along (stopped by `settle`)."""
    topic = create_topic(source_bootstrap, f"orch-{uuid.uuid4().hex[:6]}", partitions=PARTITIONS)
    source = preload(source_bootstrap, topic, PARTITIONS, BACKLOG)
    quota = deployment.write_quota = WriteQuota(destination_bootstrap, f"mirror-pipeline.{deployment.link}.writer")
    quota.put(WRITE_QUOTA_BYTES_S)
    try:
        created = run_cli(
            deployment.home, "mirror", "create", topic, "--link", deployment.link, "--config", str(deployment.config)
        )
        assert created.returncode == 0, created.stdout + created.stderr
        live = LiveSource(source_bootstrap, topic, PARTITIONS, "gapfree", rate=RATE)
        live.seq = list(source.seq)  # sequence numbers go on from the backlog
        live.start()
        yield topic, live
        if live.is_alive():
            live.stop()
    finally:
        quota.lift()


@pytest.mark.timeout(RUN_START_S + 2 * RECOVERY_S + 300)
def test_a_killed_run_worker(deployment, mirror, source_bootstrap, destination_bootstrap, fault_report):
    topic, live = mirror
    victim, worker = wait_for_copying_run(deployment.instance, destination_bootstrap, topic)
    os.kill(worker, signal.SIGKILL)
    # The code server sees its child die and ends the run itself; run monitoring is the second guard.
    recover(
        deployment,
        victim,
        time.time(),
        ("terminated by signal 9", f"run worker (process {worker}) is gone"),
        live,
        topic,
        source_bootstrap,
        destination_bootstrap,
        fault_report,
        "a run worker killed mid-copy",
    )


@pytest.mark.timeout(RUN_START_S + 2 * RECOVERY_S + 300)
def test_a_killed_code_server(deployment, mirror, source_bootstrap, destination_bootstrap, fault_report):
    topic, live = mirror
    victim, worker = wait_for_copying_run(deployment.instance, destination_bootstrap, topic)
    os.killpg(deployment.child_pid("code-server"), signal.SIGKILL)  # its own group: the server and its workers
    # Nothing is left to report the run's end: only run monitoring can see that its worker is gone.
    recover(
        deployment,
        victim,
        time.time(),
        (f"run worker (process {worker}) is gone",),
        live,
        topic,
        source_bootstrap,
        destination_bootstrap,
        fault_report,
        "the code server and its run workers killed while a run copies",
    )


@pytest.mark.timeout(RUN_START_S + 2 * RECOVERY_S + 300)
def test_a_killed_daemon(deployment, mirror, source_bootstrap, destination_bootstrap, fault_report):
    topic, live = mirror
    wait_for_copying_run(deployment.instance, destination_bootstrap, topic)
    os.kill(deployment.child_pid("dagster-daemon"), signal.SIGKILL)
    recover(
        deployment,
        None,
        time.time(),
        (),
        live,
        topic,
        source_bootstrap,
        destination_bootstrap,
        fault_report,
        "the daemon killed while a run copies",
    )


@pytest.mark.timeout(RUN_START_S + 2 * RECOVERY_S + 300)
def test_a_killed_follow_run_worker(deployment, mirror, source_bootstrap, destination_bootstrap, fault_report):
    """The worker of the link's always-on run is killed: its follow-mode process (a Pipes child) stops by itself
    after the epoch in flight, the run is marked failed, and the link's scheduled automation takes over."""
    topic, live = mirror
    names = LinkNames(deployment.link)
    host, port = deployment.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    follow_run = DagsterGraphQLClient(host, port_number=int(port)).submit_job_execution(
        names.follow_job,
        repository_location_name="mirror-pipeline",
        repository_name="__repository__",
        run_config={"ops": {f"{names.group}_follow_epochs": {"config": {"epoch_seconds": FOLLOW_EPOCH_S}}}},
    )
    worker, follower = wait_for_following(deployment, follow_run, topic)
    fault_at = time.time()
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + FOLLOW_EPOCH_S + RUN_START_S
    while running(follower) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not running(follower), f"follow mode (process {follower}) still runs with its run worker gone"
    recover(
        deployment,
        follow_run,
        fault_at,
        ("terminated by signal 9", f"run worker (process {worker}) is gone"),
        live,
        topic,
        source_bootstrap,
        destination_bootstrap,
        fault_report,
        "the worker of an always-on (follow) run killed mid-copy",
    )


def wait_for_following(deployment: Deployment, run_id: str, topic: str) -> tuple[int, int]:
    """(run worker pid, follow-mode pid) once the follow run copies (`topic` is its link's only mirror with work)."""
    instance = deployment.instance
    deadline = time.monotonic() + RUN_START_S
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run.status in TERMINAL:
            # Follow mode's own output goes to the deployment's log, the run's events say how it ended.
            events = "\n".join(e.message or "" for e in instance.all_logs(run_id) if e.is_dagster_event)
            pytest.fail(
                f"follow run {run_id} ended {run.status} before the fault:\n{events[-3000:]}\n"
                f"the deployment's log ends:\n{deployment.ui.log.read_text()[-6000:]}"
            )
        worker = run_worker(instance, run)
        followers = [] if isinstance(worker, str) else children_running(worker[0], "--follow")
        if followers and follow_copied(instance, run_id):
            return worker[0], followers[0]
        time.sleep(0.5)
    pytest.fail(f"follow run {run_id} did not copy {topic} within {RUN_START_S} s")


def follow_copied(instance: DagsterInstance, run_id: str) -> bool:
    """Whether an epoch of follow run `run_id` copied records: the link's replicate runs before it copied
    too, so the mirror's log ends cannot tell."""
    for event in instance.all_logs(run_id):
        copied = COPIED_IN_EPOCH.search(event.message or "")
        if copied and int(copied.group(1).replace(",", "")) > 0:
            return True
    return False


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie left unreaped has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def children_running(parent: int, marker: str) -> list[int]:
    """Processes whose parent is `parent` and whose command line holds `marker`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid == parent and any(marker.encode() in arg for arg in argv):
            found.append(int(entry))
    return found


def recover(
    deployment: Deployment,
    victim: str | None,
    fault_at: float,
    reasons: tuple[str, ...],
    live: LiveSource,
    topic: str,
    source_bootstrap: str,
    destination_bootstrap: str,
    fault_report,
    scenario: str,
) -> None:
    """The victim run ends FAILURE for one of `reasons`, a later run succeeds, the lag returns to 0, and
    the mirror holds every source record once."""
    instance = deployment.instance
    if deployment.write_quota:
        deployment.write_quota.lift()  # throttled writers would slow the recovery measured
    if victim is not None:
        failed = wait_for_status(instance, victim, TERMINAL, RECOVERY_S)
        assert failed.status == DagsterRunStatus.FAILURE, f"run {victim} ended {failed.status}"
        why = "\n".join(entry.message or "" for entry in instance.all_logs(victim))
        assert any(reason in why for reason in reasons), why[-3000:]
    healed = wait_for_good_run_after(instance, fault_at, RECOVERY_S, deployment.link)
    recovered_s = healed.end_time - fault_at
    live.stop()
    wait_for_no_lag(source_bootstrap, destination_bootstrap, topic, RECOVERY_S, lambda: why_it_lags(deployment, topic))
    verdict = assert_clean(
        deployment.config,
        deployment.link,
        source_bootstrap,
        destination_bootstrap,
        topic,
        PARTITIONS,
        complete=True,
        expected_state="ACTIVE",
        report=lambda v: fault_report(
            f"orchestrator: {scenario}; a good run ended {recovered_s:.0f} s after it", {"orchestrator": 1}, v
        ),
    )
    assert verdict.records_checked >= PARTITIONS * BACKLOG


def wait_for_copying_run(instance: DagsterInstance, destination: str, topic: str, link: str = LINK) -> tuple[str, int]:
    """(run id, worker pid) of a started replicate run of `link`, once `topic`'s mirror holds some of its backlog."""
    deadline = time.monotonic() + RUN_START_S
    while time.monotonic() < deadline:
        copied = sum(max(0, end) for end in log_ends(destination, topic, PARTITIONS).values())
        assert copied < PARTITIONS * BACKLOG, "the backlog was copied before the fault could hit mid-copy"
        for run in instance.get_runs(
            RunsFilter(job_name=LinkNames(link).replicate_job, statuses=[DagsterRunStatus.STARTED])
        ):
            worker = run_worker(instance, run)
            if copied > 0 and not isinstance(worker, str) and process_alive(*worker):
                print(f"run {run.run_id} caught mid-copy: {copied:,} of {PARTITIONS * BACKLOG:,} records copied")
                return run.run_id, worker[0]
        time.sleep(0.2)
    pytest.fail(f"no replicate run of {link} copied {topic} within {RUN_START_S} s")


def wait_for_status(instance: DagsterInstance, run_id: str, statuses: set, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run.status in statuses:
            return run
        time.sleep(1)
    pytest.fail(f"run {run_id} is still {instance.get_run_by_id(run_id).status} {timeout_s} s after the fault")


def wait_for_good_run_after(instance: DagsterInstance, after: float, timeout_s: float, link: str = LINK):
    """The record of the first replicate run of `link` started after `after` that succeeded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        records = instance.get_run_records(
            RunsFilter(job_name=LinkNames(link).replicate_job, statuses=[DagsterRunStatus.SUCCESS])
        )
        later = [r for r in records if r.start_time and r.start_time > after]
        if later:
            return min(later, key=lambda r: r.end_time)
        time.sleep(1)
    pytest.fail(f"no replicate run of {link} succeeded within {timeout_s} s of the fault")


def wait_for_no_lag(source: str, destination: str, topic: str, timeout_s: float, why: Callable[[], str]) -> None:
    """Until the mirror's log ends equal the source's: the automation caught up by itself."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log_ends(source, topic, PARTITIONS) == log_ends(destination, topic, PARTITIONS):
            return
        time.sleep(2)
    pytest.fail(
        f"the mirror still lags {timeout_s} s after the fault: source {log_ends(source, topic, PARTITIONS)}, "
        f"mirror {log_ends(destination, topic, PARTITIONS)}\n{why()}"
    )


def why_it_lags(deployment: Deployment, topic: str) -> str:
    """What the CLI says of the mirror, and how the link's last runs ended: the clues a lag left unexplained."""
    described = run_cli(
        deployment.home, "mirror", "describe", topic, "--link", deployment.link, "--config", str(deployment.config)
    )
    lines = [f"mirror describe (exit {described.returncode}):", described.stdout + described.stderr]
    names = LinkNames(deployment.link)
    for run in deployment.instance.get_runs(RunsFilter(job_name=names.replicate_job), limit=5):
        lines.append(f"run {run.run_id} of {run.job_name}: {run.status.value}")
        if run.status == DagsterRunStatus.FAILURE:
            messages = [e.message or "" for e in deployment.instance.all_logs(run.run_id) if e.is_dagster_event]
            lines.append("\n".join(messages)[-1500:])
    lines.append(f"the deployment's log ends:\n{deployment.ui.log.read_text()[-4000:]}")
    return "\n".join(lines)
