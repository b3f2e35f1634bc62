"""Every runbook in docs/runbooks/ run as written, against the local Kafka pair (issue #32).

Each page's ```sh blocks run in page order through the real `mirror-pipeline`
executable of this virtualenv, in a directory of their own, with
`MIRROR_PIPELINE_CONFIG` naming a config whose links both ways are this
test's (their internal topics of their own) and the placeholders filled from
it. Each command must exit as the page says (0, or the code of an
`<!-- runbook: exit N (why) -->` marker); blocks marked skip do not run.
Each page starts from the state its "You have" line names, made here
through the engine, and ends in the state its "You get" line promises,
checked on the clusters. A renamed command or flag fails this test, not an
operator following the page.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from tests.config_files import write_two_way_config
from tests.doc_blocks import REPO, RUNBOOKS, blocks, fill
from tests.integration.test_failback import catch_up as catch_up_link
from tests.kafka_records import assert_identical, commit, committed, read_topic

PARTITIONS = 2
FIRST, LATER = 100, 40  # records copied before the page starts; records still to copy when it starts
COMMITTED = {0: 30, 1: 30}  # the test group's position on the source, within what was copied
EXECUTABLE = Path(sys.executable).parent / "mirror-pipeline"


@dataclass
class Setup:
    """One page's link pair, topic and group on the local clusters."""

    source: str
    destination: str
    path: Path
    forward: str
    back: str
    topic: str
    group: str

    @property
    def config(self):
        return load_config(self.path)

    def placeholders(self) -> dict[str, str]:
        return {"link": self.forward, "reverse-link": self.back, "topic": self.topic, "group": self.group}

    def state(self, link: str) -> str | None:
        return {m.mirror_topic: m.state for m in engine.list_mirrors(self.config, link)}.get(self.topic)


@dataclass(frozen=True)
class Ran:
    command: str
    returncode: int
    stdout: str
    stderr: str


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)], partition=i % PARTITIONS)
    assert p.flush(30) == 0


def catch_up(setup: Setup, spark) -> None:
    catch_up_link(setup.config, setup.forward, spark, setup.topic)


# Where a page starts: what its "You have" line names.


def records_on_source(setup: Setup, spark) -> None:
    produce(setup.source, setup.topic, FIRST)


def active_mirror(setup: Setup, spark) -> None:
    """An ACTIVE mirror that copied FIRST records, the group committed on the source, LATER records not copied yet."""
    records_on_source(setup, spark)
    engine.create_mirror(setup.config, setup.forward, setup.topic)
    catch_up(setup, spark)
    commit(setup.source, setup.group, setup.topic, COMMITTED)
    produce(setup.source, setup.topic, LATER, start=FIRST)


def failed_over_mirror(setup: Setup, spark) -> None:
    """The applications moved to the destination after a failover that left LATER records on the source."""
    active_mirror(setup, spark)
    engine.failover(setup.config, setup.forward, [setup.topic])


# Where a page ends: what its "You get" line promises.


def assert_writable(bootstrap: str, topic: str) -> None:
    before = sum(len(r) for r in read_topic(bootstrap, topic, PARTITIONS).values())
    produce(bootstrap, topic, 1, start=10**6)
    assert sum(len(r) for r in read_topic(bootstrap, topic, PARTITIONS).values()) == before + 1


def copied_and_identical(setup: Setup, ran: list[Ran]) -> None:
    assert setup.state(setup.forward) == "ACTIVE"
    assert engine.describe_mirror(setup.config, setup.forward, setup.topic).lag == 0
    assert_identical(
        read_topic(setup.source, setup.topic, PARTITIONS), read_topic(setup.destination, setup.topic, PARTITIONS)
    )


def caught_up_after_pause(setup: Setup, ran: list[Ran]) -> None:
    copied_and_identical(setup, ran)  # the LATER records, waiting through the pause, arrived
    history = [
        (h[1], h[2])
        for h in next(
            m for m in engine.list_mirrors(setup.config, setup.forward) if m.mirror_topic == setup.topic
        ).history
    ]
    assert history[-2:] == [("ACTIVE", "PAUSED"), ("PAUSED", "ACTIVE")]


def promoted(setup: Setup, ran: list[Ran]) -> None:
    assert setup.state(setup.forward) == "STOPPED"
    assert_identical(
        read_topic(setup.source, setup.topic, PARTITIONS),  # nothing lost: LATER copied before stopping
        read_topic(setup.destination, setup.topic, PARTITIONS),
    )
    assert committed(setup.destination, setup.group, setup.topic, PARTITIONS) == COMMITTED
    assert_writable(setup.destination, setup.topic)


def failed_over(setup: Setup, ran: list[Ran]) -> None:
    assert setup.state(setup.forward) == "STOPPED"
    source = read_topic(setup.source, setup.topic, PARTITIONS)
    mirror = read_topic(setup.destination, setup.topic, PARTITIONS)
    for p in range(PARTITIONS):  # exactly what was mirrored: the LATER records stayed behind
        assert mirror[p] == source[p][: FIRST // PARTITIONS]
    assert committed(setup.destination, setup.group, setup.topic, PARTITIONS) == COMMITTED
    exported = next(r for r in ran if " offsets export " in f" {r.command} ")
    assert {f"{setup.topic},{p},{o}" for p, o in COMMITTED.items()} <= set(exported.stdout.split())
    assert_writable(setup.destination, setup.topic)


def failed_back_and_forth(setup: Setup, ran: list[Ran]) -> None:
    assert setup.state(setup.back) == "STOPPED"  # the way back was promoted ...
    assert setup.state(setup.forward) == "ACTIVE"  # ... and the destination follows the source again
    saved = read_topic(setup.source, f"{setup.topic}.diverged", PARTITIONS)
    assert sum(len(r) for r in saved.values()) == LATER  # the tail that never reached the destination
    assert_identical(
        read_topic(setup.source, setup.topic, PARTITIONS), read_topic(setup.destination, setup.topic, PARTITIONS)
    )


def verified_unchanged(setup: Setup, ran: list[Ran]) -> None:
    assert setup.state(setup.forward) == "ACTIVE"
    assert engine.describe_mirror(setup.config, setup.forward, setup.topic).lag == LATER  # verify copies nothing


def deleted(setup: Setup, ran: list[Ran]) -> None:
    assert setup.state(setup.forward) is None
    topics = AdminClient({"bootstrap.servers": setup.destination}).list_topics(timeout=10).topics
    assert setup.topic not in topics  # a mirror still copying loses its topic
    assert setup.topic in AdminClient({"bootstrap.servers": setup.source}).list_topics(timeout=10).topics


Given = Callable[[Setup, object], None]
Then = Callable[[Setup, list[Ran]], None]
SCENARIOS: dict[str, tuple[Given, Then]] = {
    "mirror-a-topic": (records_on_source, copied_and_identical),
    "pause-resume": (active_mirror, caught_up_after_pause),
    "promote": (active_mirror, promoted),
    "failover": (active_mirror, failed_over),
    "failback": (failed_over_mirror, failed_back_and_forth),
    "verify": (active_mirror, verified_unchanged),
    "delete": (active_mirror, deleted),
}


def run_page(page: Path, setup: Setup, workdir: Path) -> list[Ran]:
    """The page's command blocks in order, as a reader types them; each must exit as the page says."""
    env = {**os.environ, "MIRROR_PIPELINE_CONFIG": str(setup.path)}
    env.pop("DAGSTER_HOME", None)  # as a reader's shell: runs are recorded in ./.dagster-home
    ran = []
    for block in blocks(page):
        if block.language != "sh" or block.skip:
            continue
        for words in block.commands():
            assert words[0] == "mirror-pipeline", f"{block.where}: {words[0]} in a runbook block that runs"
            args = fill(words[1:], setup.placeholders())
            done = subprocess.run(
                [str(EXECUTABLE), *args],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=600,
            )
            shown = " ".join(["mirror-pipeline", *args])
            assert done.returncode == block.exit_code, (
                f"{block.where}: `{shown}` exited {done.returncode}, the page says {block.exit_code}\n"
                f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-3000:]}"
            )
            if block.exit_code:
                assert done.stderr.strip().splitlines()[-1].startswith("error:"), done.stderr[-2000:]
            ran.append(Ran(shown, done.returncode, done.stdout, done.stderr))
    return ran


def test_every_runbook_page_has_a_scenario():
    assert sorted(p.stem for p in RUNBOOKS) == sorted(SCENARIOS), "a runbook page needs its start and end here"


@pytest.mark.timeout(1200)  # a page is up to ten CLI processes, most starting Spark, on two shared cores
@pytest.mark.parametrize("page", RUNBOOKS, ids=lambda p: p.stem)
def test_runbook_runs_as_written(
    page, tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    given, then = SCENARIOS[page.stem]
    tag = uuid.uuid4().hex[:8]
    forward, back = f"runbook-{tag}-we", f"runbook-{tag}-ew"
    group = unique_name("group")
    groups = {"groupFilters": [{"name": group, "patternType": "LITERAL"}]}
    path = write_two_way_config(
        tmp_path / "mirror.yaml",
        source_bootstrap,
        destination_bootstrap,
        forward,
        back,
        f"runbook-{tag}",
        {"consumer.offset.sync.enable": True, "consumer.offset.group.filters": groups},
    )
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    setup = Setup(source_bootstrap, destination_bootstrap, path, forward, back, topic, group)
    workdir = tmp_path / "operator"
    workdir.mkdir()
    given(setup, spark)

    ran = run_page(page, setup, workdir)

    assert ran, f"{page.relative_to(REPO)} ran no command"
    then(setup, ran)
