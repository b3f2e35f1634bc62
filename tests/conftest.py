"""Shared fixtures.

Kafka-backed fixtures are lazy: a broker starts only when a test asks for
`local_kafka` (directly or through the bootstrap fixtures), so unit tests never
pay for the JVMs. Such tests are marked `integration` automatically, so
`pytest -m "not integration"` runs without Java.

The test clusters live in `<repo>/.local-kafka/test` on ports 11592/21592/31592,
away from a demo's 19092 and below Linux's ephemeral port range (32768-60999),
where an outgoing connection may hold a port at any moment. Set MIRROR_PIPELINE_KEEP_TEST_KAFKA=1 to leave them
running after the session (the next session then reuses them in under a second).

`secure_kafka` is a second, secured pair (sasl_ssl, SCRAM-SHA-512 users, ACLs
enforced) in `<repo>/.local-kafka/test-secure` on ports 12592/22592, with the
same sharing rules; it too starts only when a test asks for it.

Under pytest-xdist (`make test` runs several workers) worker N > 0 has clusters
of its own: `test-gwN` and `test-secure-gwN`, every port 20*N higher. Tests were
written for clusters nobody else writes to at the same moment (links of one
name, cluster-wide transactional ids, brokers killed on purpose), and this keeps
them so.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_pipeline.local.clusters import PERFORMANCE_ENV, LocalKafka
from mirror_pipeline.local.layout import ClusterLayout
from mirror_pipeline.local.postgres import PostgresServer, PostgresUnavailable, local_postgres
from mirror_pipeline.local.processes import admin_client, answers_metadata, exit_code, tail_file
from tests.fuzzing import case_file

# Fixtures of the secured pair's link (`principals`, `secured_link`), for any test module that asks.
pytest_plugins = ["tests.secured_link"]

REPO = Path(__file__).resolve().parents[1]
#: This pytest-xdist worker's number; 0 outside xdist. Worker 0 uses the clusters a plain run uses.
WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
_WORKER_SUFFIX = f"-gw{WORKER}" if WORKER else ""
_WORKER_PORT_STEP = 20  # a cluster takes two ports; 50 workers still end below the secured pair's 12592
TEST_KAFKA_ROOT = REPO / ".local-kafka" / f"test{_WORKER_SUFFIX}"
SESSIONS_DIR = REPO / ".local-kafka" / f"test{_WORKER_SUFFIX}-sessions"
TEST_KAFKA_BASE_PORT = 11592 + _WORKER_PORT_STEP * WORKER
TEST_KAFKA_COUNT = 3
KEEP_ENV = "MIRROR_PIPELINE_KEEP_TEST_KAFKA"
TEST_SECURE_ROOT = REPO / ".local-kafka" / f"test-secure{_WORKER_SUFFIX}"
SECURE_SESSIONS_DIR = REPO / ".local-kafka" / f"test-secure{_WORKER_SUFFIX}-sessions"
TEST_SECURE_BASE_PORT = 12592 + _WORKER_PORT_STEP * WORKER
TEST_SECURE_COUNT = 2
TEST_SECURE_MODE = "sasl_ssl"

#: The test brokers run C1-compiled code with the serial collector (`local up` keeps Kafka's G1 for the demo
#: and the benchmarks). A broker of the suite lives minutes under light load, where C2's compiles and G1's
#: threads are much of its CPU: on 2 cores a start took 3.0 CPU s instead of 5.8, and a cycle copying
#: 200,000 records 0.9-1.4 s of the brokers' CPU instead of 1.2-2.1. The suite is CPU-bound.
os.environ.setdefault(PERFORMANCE_ENV, "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")

#: Fewer request threads than Kafka's production defaults (8 I/O, 3 network) and the controller's no-op
#: metadata record every 5 s instead of 0.5 s: an idle test broker spent 1.5 CPU s a minute, 0.8 with
#: these, and `make test` keeps fourteen of them on two cores for twenty minutes.
TEST_BROKER_SETTINGS = (
    ("num.io.threads", "2"),
    ("num.network.threads", "1"),
    ("metadata.max.idle.interval.ms", "5000"),
)

_KAFKA_FIXTURES = {"local_kafka", "source_bootstrap", "destination_bootstrap", "third_bootstrap", "secure_kafka"}


#: The pytest-xdist group (`make test` runs `--dist loadgroup`) of every test on the secured pair: one
#: worker starts that pair, not each worker that gets such a test.
SECURE_GROUP = "secured-pair"


#: The groups that take longest, longest first, with their seconds from one clean clone's `make test` (a
#: hand-kept table: a group missing from it only goes out later).
#: `make test` hands groups out in collection order (`--no-loadscope-reorder`; xdist's own order is by
#: number of tests, which deals the unit-test files first and a five-minute group last): longest first,
#: the rest fill in around them.
LONG_GROUPS = {
    "test_orchestrator": 500,
    SECURE_GROUP: 330,
    "test_races": 325,
    "test_runbooks": 267,
    "test_ui": 232,
    "test_orchestrator_postgres": 187,
    "test_verify": 144,
    "test_lifecycle": 143,
    "test_brokers": 123,
    "test_offset_sync": 120,
    "test_kills": 111,
    "test_follow_races": 104,
    "test_cli_records": 96,
    # Minute-long groups: left to the end of the order, they ran alone on a worker after the rest had finished.
    # Their seconds are from a later clean clone's run, divided by 1.5 (the median ratio of the groups above
    # between the two runs), so that the table stays one scale.
    "test_spark_cluster": 115,
    "test_lifecycle_all_or_nothing": 69,
    "test_failback": 60,
    "test_stalled_writer": 55,
    "test_topologies": 51,
    "test_copy": 39,
    "test_follow_late_tasks": 40,
    "test_metrics_exporter": 33,
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if _KAFKA_FIXTURES & fixtures:
            item.add_marker(pytest.mark.integration)
        # A test file's tests stay on one worker (module fixtures start once), the secured pair's all on one.
        group = SECURE_GROUP if "secure_kafka" in fixtures else Path(str(item.fspath)).stem
        item.add_marker(pytest.mark.xdist_group(group))
        groups[item.nodeid] = group
    items.sort(key=lambda item: -LONG_GROUPS.get(groups[item.nodeid], 0))  # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """Stops a `--dist loadgroup` run whose groups did not take, before any test runs: pytest-xdist marks
    a grouped test by appending `@group` to its node id, which pytest 9.2 ignores (pytest-xdist issue
    #1386), and the tests are then dealt one by one, each worker starting every module's fixtures and
    a secured pair of its own."""
    if node.config.getoption("dist") == "loadgroup" and ids and not any("@" in nodeid for nodeid in ids):
        pytest.exit(
            f"--dist loadgroup did not group the tests (node id {ids[0]!r} has no @group): this pytest "
            "and pytest-xdist do not work together; see the pytest pin in pyproject.toml",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched) -> None:
    """A worker that died in a fuzz test (an abort inside librdkafka, say): its report shows the case."""
    noted = case_file(os.getpid(), report.node.gateway.id)  # type: ignore[attr-defined]
    if noted.exists():
        case = noted.read_text(errors="backslashreplace")[:20_000]
        noted.unlink()
        report.longrepr = f"{report.longrepr}\n\nthe fuzz case it was running (tests/fuzzing.note_case):\n{case}"


@pytest.fixture(scope="session")
def local_kafka() -> Iterator[LocalKafka]:
    """Three running clusters: us-west (source), us-east (destination), eu-west (third).

    Several pytest runs may share the checkout (and so these clusters) at
    once: each run holds a lease file, and only the last one to finish stops
    the clusters. Storage is wiped when no run holds a lease and no cluster is
    running, so a session starts without topics left by earlier sessions.
    """
    kafka = LocalKafka(root=TEST_KAFKA_ROOT, count=TEST_KAFKA_COUNT, base_port=TEST_KAFKA_BASE_PORT)
    kafka.broker_settings = TEST_BROKER_SETTINGS
    with shared_between_runs(SESSIONS_DIR, kafka.up, kafka.down, fresh=_wiper(kafka, TEST_KAFKA_ROOT)):
        yield kafka


@pytest.fixture(scope="session")
def secure_kafka() -> Iterator[LocalKafka]:
    """Two running sasl_ssl clusters, us-west and us-east, that authenticate and authorize.

    `secure_kafka.client_properties(user, cluster)` gives a client's settings
    (`admin`, the default, is a super user); `secure_kafka.create_user(name)`
    adds a principal without ACLs to both clusters. Shared between pytest runs
    like `local_kafka`, with leases of its own.
    """
    kafka = LocalKafka(
        root=TEST_SECURE_ROOT, count=TEST_SECURE_COUNT, base_port=TEST_SECURE_BASE_PORT, security=TEST_SECURE_MODE
    )
    kafka.broker_settings = TEST_BROKER_SETTINGS
    # A fresh root also means fresh credentials.
    with shared_between_runs(SECURE_SESSIONS_DIR, kafka.up, kafka.down, fresh=_wiper(kafka, TEST_SECURE_ROOT)):
        yield kafka


@contextlib.contextmanager
def shared_between_runs(
    sessions_dir: Path,
    start: Callable[[], object],
    stop: Callable[[], object],
    fresh: Callable[[], object] | None = None,
) -> Iterator[None]:
    """Servers several pytest runs of one checkout share: each run holds a lease file in
    `sessions_dir`, `start` runs under the leases' lock (after `fresh`, when no other run
    holds a lease), and only the last run to finish calls `stop` (unless KEEP_ENV is set)."""
    with _session_lock(sessions_dir):
        if fresh is not None and not _live_leases(sessions_dir):
            fresh()
        (sessions_dir / str(os.getpid())).touch()
        try:
            start()
        except BaseException:
            # e.g. one broker of a pair did not answer: the other must not be left running with a lease
            _release(sessions_dir, stop, keep=False)
            raise
    try:
        yield
    finally:
        with _session_lock(sessions_dir):
            _release(sessions_dir, stop, keep=bool(os.environ.get(KEEP_ENV)))


def _release(sessions_dir: Path, stop: Callable[[], object], keep: bool) -> None:
    """Drop this run's lease (under the leases' lock) and stop the servers if no other run holds one."""
    (sessions_dir / str(os.getpid())).unlink(missing_ok=True)
    if not _live_leases(sessions_dir) and not keep:
        stop()


def _wiper(kafka: LocalKafka, root: Path) -> Callable[[], None]:
    """Wipes `root` when none of its clusters runs: a session starts without earlier sessions' topics."""

    def wipe() -> None:
        if not any(info.running for info in kafka.status()):
            shutil.rmtree(root, ignore_errors=True)

    return wipe


@contextlib.contextmanager
def _session_lock(sessions_dir: Path = SESSIONS_DIR) -> Iterator[None]:
    sessions_dir.mkdir(parents=True, exist_ok=True)
    with open(sessions_dir / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _live_leases(sessions_dir: Path = SESSIONS_DIR) -> list[int]:
    """Pids of other pytest runs using the test clusters; stale lease files are removed.

    A lease is live while its process is a Python one: `pytest-xdist`'s workers
    (`make test` runs several) do not name pytest on their command line."""
    live = []
    for lease in sessions_dir.iterdir():
        if not lease.name.isdigit() or int(lease.name) == os.getpid():
            continue
        try:
            alive = b"python" in Path(f"/proc/{lease.name}/cmdline").read_bytes()
        except OSError:
            alive = False
        if alive:
            live.append(int(lease.name))
        else:
            lease.unlink(missing_ok=True)
    return live


@pytest.fixture(autouse=True)
def _clusters_still_running(request: pytest.FixtureRequest) -> None:
    """Starts again, before a test that uses them, this worker's clusters that stopped during an earlier test.

    A broker killed on purpose and not brought back (a fault test that failed half-way), or one that
    died by itself, would otherwise fail every later test of the worker as unreachable: in one CI run a
    destination broker stopped and 35 tests after it failed. Why it stopped goes into a warning."""
    for name in ("local_kafka", "secure_kafka"):
        if name in request.fixturenames:
            kafka: LocalKafka = request.getfixturevalue(name)
            stopped = [info for info in kafka.status() if not info.running]
            if stopped:
                why = "; ".join(_why_stopped(kafka.layout(info.name)) for info in stopped)
                warnings.warn(f"started again: {why}", stacklevel=1)
                kafka.up()
            for cluster in kafka.names:
                _wait_until_answering(kafka, cluster)


#: A test cluster answers a metadata request in milliseconds. In one CI run (a loaded machine) a destination
#: broker did not answer for 15 s and two tests failed at their first step as "us-east did not answer within
#: 15s"; why is not known. A test now waits that out first, and a warning says for how long and at what load.
ANSWER_AT_ONCE_S = 3.0
ANSWER_WAIT_S = 120.0
_probes: dict[str, object] = {}


def _wait_until_answering(kafka: LocalKafka, cluster: str) -> None:
    layout = kafka.layout(cluster)
    probe = _probes.get(layout.bootstrap)
    if probe is None:
        probe = _probes[layout.bootstrap] = admin_client(layout.bootstrap, kafka.client_properties(cluster=cluster))
    started = time.monotonic()
    if answers_metadata(probe, ANSWER_AT_ONCE_S):
        return
    while not (answered := answers_metadata(probe, 5.0)) and time.monotonic() - started < ANSWER_WAIT_S:
        time.sleep(0.25)
    waited = f"{time.monotonic() - started:.0f} s"
    outcome = f"answered a metadata request after {waited}" if answered else f"did not answer metadata for {waited}"
    load = ", ".join(f"{n:.1f}" for n in os.getloadavg())
    warnings.warn(
        f"local Kafka cluster {cluster} ({layout.bootstrap}) {outcome} before this test (load average {load})",
        stacklevel=1,
    )


def _why_stopped(cluster: ClusterLayout) -> str:
    code = exit_code(cluster)  # None when another process started it
    how = f"exited with code {code}" if code is not None else "was not running"
    tail = tail_file(cluster.server_log, lines=5).strip()
    return f"local Kafka cluster {cluster.name} ({cluster.bootstrap}) {how}; the end of its server.log:\n{tail}"


@pytest.fixture(scope="session")
def source_bootstrap(local_kafka: LocalKafka) -> str:
    return local_kafka.bootstraps[0]


@pytest.fixture(scope="session")
def destination_bootstrap(local_kafka: LocalKafka) -> str:
    return local_kafka.bootstraps[1]


@pytest.fixture(scope="session")
def third_bootstrap(local_kafka: LocalKafka) -> str:
    return local_kafka.bootstraps[2]


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test run (starting one costs seconds)."""
    from mirror_pipeline.config.loader import SparkSettings
    from mirror_pipeline.replication.spark_runner import spark_session

    session = spark_session(SparkSettings(master="local[2]"))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server per test session (`mirror_pipeline.local.postgres`, fsync off).

    Without the binaries (or, as root, without a `postgres` user) the tests that
    ask for it fail, saying what is missing: `make setup` installs them, so their
    absence means the machine was not set up, not that the tests do not apply.
    """
    try:
        with local_postgres() as server:
            yield server
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory of topic/group names unique to this test and run: `unique_name("orders")`.

    Names hold only [a-zA-Z0-9-] (underscores and dots become dashes: Kafka
    treats '.' and '_' as colliding in metric names), so they are valid topic
    names; the uuid suffix keeps reruns against kept clusters apart.
    """
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:80]

    def make(label: str = "") -> str:
        label = re.sub(r"[^a-zA-Z0-9]+", "-", label).strip("-")
        return "-".join(p for p in (base, label, uuid.uuid4().hex[:8]) if p)

    return make


@pytest.fixture
def admin() -> Callable[[str], AdminClient]:
    """Factory of AdminClients by bootstrap address, one per address per test."""
    clients: dict[str, AdminClient] = {}

    def get(bootstrap: str) -> AdminClient:
        if bootstrap not in clients:
            clients[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
        return clients[bootstrap]

    return get


@pytest.fixture
def create_topic(admin: Callable[[str], AdminClient]) -> Callable[..., str]:
    """Factory: `create_topic(bootstrap, name, partitions=1, config=None)` creates a
    topic (auto-create is off on the local clusters), waits until metadata shows
    all its partitions, and returns its name."""

    def create(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        client = admin(bootstrap)
        futures = client.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
        )
        futures[name].result(timeout=30)
        deadline = time.monotonic() + 30
        while True:
            topic = client.list_topics(topic=name, timeout=10).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == partitions:
                if all(p.leader >= 0 for p in topic.partitions.values()):
                    return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not ready on {bootstrap} after 30 s")
            time.sleep(0.1)

    return create
