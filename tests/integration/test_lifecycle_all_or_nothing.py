"""Lifecycle verbs given several mirrors are all or nothing, on the real local pair (issue #31, R-LC-8).

Every named mirror is checked first: one that cannot go refuses the whole
request, naming each that cannot and why, and nothing changes. A verb that
passed its checks and then fails part-way (a broker that stops answering,
injected here into the registry write or topic deletion of one mirror) says
which mirrors changed and which did not, and undoes nothing.

Each test's link keeps its state in internal topics of its own, so its
registry never holds another test's mirrors.
"""

from __future__ import annotations

import json
import threading
import time

import dagster as dg
import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.cli.dagster_runs import failure_message
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_store import StateStore
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorRefused
from mirror_pipeline.operations import reverse as reversing
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.lifecycle_jobs import stop_run_config
from tests.config_files import write_two_way_config
from tests.integration.conftest import LINK

BACK = "east-to-west"
OUTAGE = "cluster 'us-east' (127.0.0.1:9) did not answer within 30s: timed out"


@pytest.fixture
def own_link(write_config, unique_name):
    """(config file, config) of link `west-to-east` with internal topics of its own."""
    u = unique_name("state")
    path = write_config(
        {f"mirror.{kind}.topic": f"_mp.{u}.{kind.replace('.', '-')}" for kind in ("state", "offset.map", "checkpoints")}
    )
    return path, load_config(path)


@pytest.fixture
def mirrors(own_link, source_bootstrap, create_topic, unique_name):
    """`mirrors(*labels)`: a new ACTIVE mirror per label on the test's own link, by label."""
    _, config = own_link

    def make(*labels: str) -> dict[str, str]:
        made = {}
        for label in labels:
            topic = create_topic(source_bootstrap, unique_name(label), partitions=2)
            made[label] = engine.create_mirror(config, LINK, topic).mirror_topic
        return made

    return make


def states(config, link: str = LINK) -> dict[str, tuple[str, int]]:
    """Every mirror of the link: (state, number of recorded transitions)."""
    return {m.mirror_topic: (m.state, len(m.history)) for m in engine.list_mirrors(config, link)}


def cli_in_process(*args: str):
    return CliRunner().invoke(cli, list(args))


def outage_for(mirror: str, monkeypatch) -> None:
    """The destination stops answering when the registry record of `mirror` is written, after the checks passed."""
    real = StateStore.update_mirror

    def update_mirror(self, name, decide):
        if name == mirror:
            raise ClusterUnreachable(OUTAGE)
        return real(self, name, decide)

    monkeypatch.setattr(StateStore, "update_mirror", update_mirror)


# --- refusals: nothing changes -------------------------------------------------------------------


def test_pause_with_one_mirror_stopped_or_unknown_changes_nothing(own_link, mirrors):
    path, config = own_link
    m = mirrors("a", "b")
    engine.failover(config, LINK, [m["b"]])
    before = states(config)

    with pytest.raises(MirrorRefused) as refused:
        engine.pause(config, LINK, [m["a"], m["b"], "nosuch"])

    assert states(config) == before  # 'a' is still ACTIVE: nothing was paused
    known = ", ".join(sorted(m.values()))
    assert str(refused.value) == (
        f"pause refused: no mirror 'nosuch' on link '{LINK}' (its mirrors: {known}); "
        f"mirror '{m['b']}' is STOPPED (only an ACTIVE mirror can be paused); nothing was changed"
    )

    out = cli_in_process("mirror", "pause", m["a"], m["b"], "--link", LINK, "--config", str(path))
    assert out.exit_code == 1
    assert out.stderr == (
        f"error: pause refused: mirror '{m['b']}' is STOPPED (only an ACTIVE mirror can be "
        f"paused); nothing was changed\n"
    )
    assert out.stdout == ""
    assert states(config) == before


def test_resume_with_one_mirror_stopped_changes_nothing(own_link, mirrors):
    path, config = own_link
    m = mirrors("a", "b")
    engine.pause(config, LINK, [m["a"]])
    engine.failover(config, LINK, [m["b"]])
    before = states(config)

    out = cli_in_process("mirror", "resume", m["a"], m["b"], "--link", LINK, "--config", str(path), "--json")

    assert states(config) == before and before[m["a"]][0] == "PAUSED"
    assert out.exit_code == 1 and out.stdout == ""
    assert json.loads(out.stderr) == {
        "error": f"resume refused: mirror '{m['b']}' is STOPPED (only a PAUSED mirror "
        f"can be resumed); nothing was changed"
    }


def test_pause_and_resume_of_every_mirror_leave_the_stopped_ones_out(own_link, mirrors):
    path, config = own_link
    m = mirrors("a", "b")
    engine.failover(config, LINK, [m["b"]])

    paused = engine.pause(config, LINK).mirrors
    assert paused[m["a"]]["after"] == "PAUSED"
    assert paused[m["b"]] == {"before": "STOPPED", "after": "STOPPED", "said": "not paused (STOPPED)"}
    resumed = engine.resume(config, LINK).mirrors
    assert resumed[m["a"]]["after"] == "ACTIVE" and resumed[m["b"]]["said"] == "not resumed (STOPPED)"


def test_delete_of_a_mirror_and_an_unknown_name_deletes_nothing(own_link, mirrors, admin, destination_bootstrap):
    path, config = own_link
    m = mirrors("a")

    out = cli_in_process("mirror", "delete", m["a"], "nosuch", "--link", LINK, "--config", str(path))

    assert out.exit_code == 1
    assert out.stderr == (
        f"error: delete refused: no mirror 'nosuch' on link '{LINK}' (its mirrors: {m['a']}); nothing was changed\n"
    )
    assert states(config)[m["a"]][0] == "ACTIVE"
    assert m["a"] in admin(destination_bootstrap).list_topics(timeout=10).topics


def test_promote_with_one_mirror_not_eligible_changes_nothing(
    own_link, mirrors, third_bootstrap, monkeypatch, tmp_path
):
    path, config = own_link
    m = mirrors("b")
    # The source address answers as another cluster: the health check fails 'b' (LINK_FAILED), no promote takes it.
    elsewhere = path.with_name("elsewhere.yaml")
    elsewhere.write_text(path.read_text().replace(config.clusters["us-west"].bootstrap_servers, third_bootstrap))
    engine.check_health(load_config(elsewhere), LINK)
    m.update(mirrors("a"))
    before = states(config)
    assert before[m["b"]][0] == "LINK_FAILED"

    with pytest.raises(MirrorRefused) as refused:
        engine.promote(config, LINK, None, [m["a"], m["b"]], timeout_s=5)

    assert states(config) == before  # 'a' is still ACTIVE, not PENDING_STOPPED
    assert str(refused.value) == (
        f"promote refused: mirror '{m['b']}' is LINK_FAILED (it cannot be promoted; "
        f"failover can stop it); nothing was changed"
    )

    # The CLI refuses before a Dagster run exists; the job's own check step refuses the same way.
    ensure_dagster_home(tmp_path / "dagster-home")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    out = cli_in_process("mirror", "promote", m["a"], m["b"], "--link", LINK, "--config", str(path))
    assert out.exit_code == 1 and out.stderr == f"error: {refused.value}\n"
    assert [p.name for p in (tmp_path / "dagster-home").iterdir()] == ["dagster.yaml"]
    run = (
        build_definitions(path)
        .get_job_def("promote")
        .execute_in_process(
            run_config=stop_run_config("promote", LINK, [m["a"], m["b"]]),
            instance=dg.DagsterInstance.ephemeral(),
            tags={"mirror-pipeline/link": LINK},
            raise_on_error=False,
            resources={"pyspark": dg.ResourceDefinition.none_resource()},
        )
    )  # a refused promote needs no Spark
    assert not run.success
    assert [e.step_key for e in run.all_events if e.is_step_failure] == ["check_promote"]
    assert failure_message(run.all_events) == str(refused.value)
    assert states(config) == before


@pytest.fixture
def two_way(tmp_path, source_bootstrap, destination_bootstrap, unique_name):
    path = write_two_way_config(
        tmp_path / "two-way.yaml", source_bootstrap, destination_bootstrap, LINK, BACK, unique_name("tw")
    )
    return path, load_config(path)


def test_failover_with_one_mirror_a_reverse_is_setting_up_changes_nothing(
    two_way, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    path, config = two_way
    reversed_topic = create_topic(source_bootstrap, unique_name("r"))
    engine.create_mirror(config, LINK, reversed_topic)
    engine.failover(config, LINK, [reversed_topic])
    # A reverse that stopped right after recording its plan: the old source is REVERSING on the back link.
    forward, back = LinkContext.open(config, LINK), LinkContext.open(config, BACK)
    stopped = forward.select([reversed_topic])[0]
    reversing._record_plan(back, stopped, reversing.make_plan(forward, back, stopped, start=True))
    other = engine.create_mirror(config, BACK, create_topic(destination_bootstrap, unique_name("o"))).mirror_topic
    before = states(config, BACK)

    with pytest.raises(MirrorRefused) as refused:
        engine.failover(config, BACK, [other, reversed_topic])

    assert states(config, BACK) == before and before[other][0] == "ACTIVE"
    assert str(refused.value) == (
        f"failover refused: mirror '{reversed_topic}' is being set up by a reverse that did "
        f"not finish (run reverse again to finish it, then promote or fail it over); "
        f"nothing was changed"
    )
    run = (
        build_definitions(path)
        .get_job_def("failover")
        .execute_in_process(
            run_config=stop_run_config("failover", BACK, [other, reversed_topic]),
            instance=dg.DagsterInstance.ephemeral(),
            tags={"mirror-pipeline/link": BACK},
            raise_on_error=False,
        )
    )
    assert [e.step_key for e in run.all_events if e.is_step_failure] == ["check_failover"]
    assert failure_message(run.all_events) == str(refused.value)
    assert states(config, BACK) == before


# --- part-way failures: what changed stays changed, and is said ------------------------------------


def test_pause_that_fails_part_way_says_what_was_paused_and_what_was_not(own_link, mirrors, monkeypatch):
    path, config = own_link
    m = mirrors("a", "b", "c")
    outage_for(m["b"], monkeypatch)

    out = cli_in_process("mirror", "pause", m["a"], m["b"], m["c"], "--link", LINK, "--config", str(path))
    as_json = cli_in_process("mirror", "pause", m["b"], m["c"], "--link", LINK, "--config", str(path), "--json")
    monkeypatch.undo()

    assert {k: v[0] for k, v in states(config).items()} == {m["a"]: "PAUSED", m["b"]: "ACTIVE", m["c"]: "ACTIVE"}
    assert out.exit_code == 1
    assert out.stderr == (
        f"error: pause did not finish on link '{LINK}': paused: {m['a']}; "
        f"not paused: {m['b']} ({OUTAGE}), {m['c']} (not attempted)\n"
    )
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:]}
    assert rows[m["a"]].split()[1:3] == ["ACTIVE", "PAUSED"]
    assert rows[m["b"]].split()[1:3] == ["ACTIVE", "ACTIVE"] and f"not paused: {OUTAGE}" in rows[m["b"]]
    assert rows[m["c"]].endswith("not paused: not attempted")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout) == {
        "verb": "pause",
        "link": LINK,
        "mirrors": {},
        "not_done": {m["b"]: {"state": "ACTIVE", "why": OUTAGE}, m["c"]: {"state": "ACTIVE", "why": "not attempted"}},
    }
    assert json.loads(as_json.stderr) == {
        "error": f"pause did not finish on link '{LINK}': not paused: {m['b']} ({OUTAGE}), {m['c']} (not attempted)"
    }


def test_delete_that_fails_part_way_says_what_was_deleted_and_what_was_left_marked(
    own_link, mirrors, monkeypatch, admin, destination_bootstrap
):
    path, config = own_link
    m = mirrors("a", "b", "c")
    real = StateStore.delete_mirror

    def delete_mirror(self, name):  # the destination stops answering after 'b' was marked and its topic deleted
        if name == m["b"]:
            raise ClusterUnreachable(OUTAGE)
        return real(self, name)

    monkeypatch.setattr(StateStore, "delete_mirror", delete_mirror)
    out = cli_in_process("mirror", "delete", m["a"], m["b"], m["c"], "--link", LINK, "--config", str(path))
    monkeypatch.undo()

    left = {i.mirror_topic: i for i in engine.list_mirrors(config, LINK)}
    assert sorted(left) == sorted([m["b"], m["c"]]) and "DELETING" in left[m["b"]].flags and not left[m["c"]].flags
    assert out.exit_code == 1
    assert out.stderr == (
        f"error: delete did not finish on link '{LINK}': deleted: {m['a']}; not deleted: {m['b']} "
        f"({OUTAGE}; it is marked DELETING and copies nothing more: run delete again to finish), "
        f"{m['c']} (not attempted)\n"
    )
    topics = admin(destination_bootstrap).list_topics(timeout=10).topics
    assert m["a"] not in topics and m["c"] in topics

    engine.delete_mirrors(config, LINK, [m["b"], m["c"]])  # running it again finishes
    assert engine.list_mirrors(config, LINK) == []


def test_failover_that_fails_part_way_in_its_dagster_run_says_what_stopped(own_link, mirrors, monkeypatch, tmp_path):
    path, config = own_link
    m = mirrors("a", "b")
    ensure_dagster_home(tmp_path / "dagster-home")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    real = StateStore.update_mirror
    calls = []

    def update_mirror(self, name, decide):  # the destination stops answering once 'b' is marked STOPPING
        if name == m["b"]:
            calls.append(name)
            if len(calls) > 1:
                raise ClusterUnreachable(OUTAGE)
        return real(self, name, decide)

    monkeypatch.setattr(StateStore, "update_mirror", update_mirror)
    out = cli_in_process("mirror", "failover", m["a"], m["b"], "--link", LINK, "--config", str(path), "--json")
    monkeypatch.undo()

    info = {i.mirror_topic: i for i in engine.list_mirrors(config, LINK)}
    assert info[m["a"]].state == "STOPPED"
    assert info[m["b"]].state == "ACTIVE" and "STOPPING" in info[m["b"]].flags
    assert out.exit_code == 1
    error = json.loads(out.stderr)["error"]
    assert error.startswith("failover failed (Dagster run ")
    assert error.endswith(
        f"): failover did not finish on link '{LINK}': failed over: {m['a']}; not failed over: "
        f"{m['b']} ({OUTAGE}; it is marked STOPPING and copies nothing more: run failover again to "
        f"finish)"
    )
    done = json.loads(out.stdout)
    assert done["mirrors"][m["a"]]["after"] == "STOPPED" and list(done["not_done"]) == [m["b"]]
    assert done["dagster_run_id"] in error

    assert engine.failover(config, LINK, [m["b"]]).mirrors[m["b"]]["after"] == "STOPPED"  # running it again finishes


def test_reverse_of_several_with_one_that_cannot_be_planned_changes_nothing(
    two_way, source_bootstrap, admin, destination_bootstrap, create_topic, unique_name
):
    path, config = two_way
    kept, gone = (create_topic(source_bootstrap, unique_name(n)) for n in ("k", "g"))
    for topic in (kept, gone):
        engine.create_mirror(config, LINK, topic)
    engine.failover(config, LINK, [kept, gone])
    admin(destination_bootstrap).delete_topics([gone])[gone].result()  # nothing left for its old source to follow

    with pytest.raises(MirrorRefused) as refused:
        engine.reverse(config, LINK, [kept, gone])

    assert str(refused.value) == (
        f"reverse refused: '{gone}' no longer exists on cluster 'us-east': there is nothing "
        f"to follow; nothing was changed"
    )
    assert engine.list_mirrors(config, BACK) == []  # 'kept' was not reversed either


def test_promote_that_times_out_on_one_mirror_says_which_it_promoted(own_link, mirrors, spark, source_bootstrap):
    path, config = own_link
    m = mirrors("a", "b")
    producing = threading.Event()

    def keep_producing():  # 'b' never reaches zero lag
        p = Producer({"bootstrap.servers": source_bootstrap, "linger.ms": 5})
        while not producing.is_set():
            for i in range(20):
                p.produce(m["b"], value=b"%d" % i)
            p.flush(10)
            time.sleep(0.05)

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        with pytest.raises(engine.Incomplete) as incomplete:
            engine.promote(config, LINK, spark, [m["a"], m["b"]], timeout_s=20)
    finally:
        producing.set()
        producer.join()

    assert {k: v[0] for k, v in states(config).items()} == {m["a"]: "STOPPED", m["b"]: "PENDING_STOPPED"}
    message = str(incomplete.value)
    assert message.startswith(
        f"promote did not finish on link '{LINK}': promoted: {m['a']}; not promoted: {m['b']} "
        f"(did not reach zero lag within 20s (producers still writing to the source?)"
    )
    assert message.endswith("; it stays PENDING_STOPPED: run promote again, or failover to stop it now)")
    result = incomplete.value.result.to_dict()
    assert result["mirrors"][m["a"]]["after"] == "STOPPED" and result["not_done"][m["b"]]["state"] == "PENDING_STOPPED"
    assert engine.failover(config, LINK, [m["b"]]).mirrors[m["b"]]["after"] == "STOPPED"  # the wait is cancelled
