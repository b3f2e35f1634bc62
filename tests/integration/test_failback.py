"""Failback on the real local pair (R-LC-7): reverse after promote or failover, with a producer on the new side.

Both links of a test keep their state in internal topics of their own, so the
reverse link's records never show up in other tests' registries.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.model.errors import MirrorError, MirrorRefused
from mirror_pipeline.operations.divergence import ORIGIN_HEADER
from tests.cli_process import run_cli
from tests.config_files import write_two_way_config
from tests.kafka_records import assert_identical, commit, committed, read_partition, read_topic

FORWARD, BACK = "west-to-east", "east-to-west"
PARTITIONS = 2


@pytest.fixture
def failback_config(tmp_path, source_bootstrap, destination_bootstrap, unique_name):
    """Links both ways between the pair, syncing the groups named `<prefix>...`; returns (path, config, prefix)."""
    prefix = unique_name("g")
    groups = {"groupFilters": [{"name": prefix, "patternType": "PREFIXED", "filterType": "INCLUDE"}]}
    path = write_two_way_config(
        tmp_path / "mirror.yaml",
        source_bootstrap,
        destination_bootstrap,
        FORWARD,
        BACK,
        f"failback-{uuid.uuid4().hex[:6]}",
        {"consumer.offset.sync.enable": True, "consumer.offset.group.filters": groups},
    )
    return path, load_config(path), prefix


class Producing(threading.Thread):
    """Keeps writing to every partition of `topic` (the applications, after they moved) until stopped."""

    def __init__(self, bootstrap: str, topic: str, tag: str):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.topic, self.tag, self.sent = topic, tag, 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            p = self.sent % PARTITIONS
            self.producer.produce(
                self.topic,
                key=b"k%d" % self.sent,
                value=f"{self.tag}-{self.sent}".encode(),
                partition=p,
                headers=[("app", self.tag.encode())],
            )
            self.sent += 1
            self.producer.poll(0)
            time.sleep(0.005)

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
        assert self.producer.flush(30) == 0


def produce(bootstrap: str, topic: str, count: int, partition: int | None = None, tag: str = "v") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(
            topic,
            key=b"k%d" % i,
            value=f"{tag}{i}".encode(),
            headers=[("h", b"1"), ("h", b"2")],
            partition=i % PARTITIONS if partition is None else partition,
        )
    assert p.flush(30) == 0


def catch_up(config, link: str, spark, topic: str, rounds: int = 10) -> None:
    for _ in range(rounds):
        engine.run_cycle(config, link, spark, mirrors=[topic])
        if engine.describe_mirror(config, link, topic).lag == 0:
            return
    raise AssertionError(f"{topic} did not catch up on {link}")


def assert_verified(config, link: str, spark, topic: str) -> None:
    result = engine.verify_mirrors(config, link, spark, mirrors=[topic])
    assert result.identical and result.source_records > 0, result.to_dict()


def state(config, link: str, topic: str) -> str:
    return {m.mirror_topic: m for m in engine.list_mirrors(config, link)}[topic].state


def test_planned_migration_and_back_keeps_every_record_and_group_offset(
    failback_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    path, config, prefix = failback_config
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    group, rewound = f"{prefix}-orders", f"{prefix}-rewound"
    produce(source_bootstrap, topic, 200)
    engine.create_mirror(config, FORWARD, topic)
    catch_up(config, FORWARD, spark, topic)
    commit(source_bootstrap, group, topic, {0: 60, 1: 70})
    commit(source_bootstrap, rewound, topic, {0: 95, 1: 95})

    engine.promote(config, FORWARD, spark, [topic], timeout_s=120)  # planned: zero lag, group synced
    assert committed(destination_bootstrap, group, topic, PARTITIONS) == {0: 60, 1: 70}
    apps = Producing(destination_bootstrap, topic, "east")  # the applications moved to us-east
    apps.start()
    try:
        commit(destination_bootstrap, group, topic, {0: 110, 1: 120})
        commit(destination_bootstrap, rewound, topic, {0: 80, 1: 90})  # reprocessing on us-east: behind us-west's
        preview = engine.reverse(config, FORWARD, [topic], dry_run=True).mirrors[topic]
        assert preview["action"] == "continue" and preview["saved_topic"] == ""
        assert state(config, FORWARD, topic) == "STOPPED"  # a dry run changes nothing
        assert topic not in {m.mirror_topic for m in engine.list_mirrors(config, BACK)}

        done = engine.reverse(config, FORWARD, [topic], realign_groups=True).mirrors[topic]

        assert (done["after"], done["new_mirror"], done["reverse_link"]) == ("ACTIVE", topic, BACK)
        assert [p["action"] for p in done["partitions"]] == ["continue"] * PARTITIONS
        assert all(p["saved_records"] == 0 for p in done["partitions"])
        # Translated back at once: one group ahead, the other moved back because the operator asked.
        assert committed(source_bootstrap, rewound, topic, PARTITIONS) == {0: 80, 1: 90}
        assert committed(source_bootstrap, group, topic, PARTITIONS) == {0: 100, 1: 100}  # the mirror's end, for now
        description = engine.describe_mirror(config, BACK, topic)
        assert description.offsets_preserved
        assert all(p.next_source_offset == 100 for p in description.partitions)  # nothing copied twice
        for _ in range(3):
            engine.run_cycle(config, BACK, spark, mirrors=[topic])
    finally:
        apps.stop()
    catch_up(config, BACK, spark, topic)
    commit(destination_bootstrap, group, topic, {0: 150, 1: 160})

    back = engine.promote(config, BACK, spark, [topic], timeout_s=120).mirrors[topic]  # and back to us-west

    assert back["after"] == "STOPPED"
    assert_identical(
        read_topic(destination_bootstrap, topic, PARTITIONS), read_topic(source_bootstrap, topic, PARTITIONS)
    )
    assert sum(len(r) for r in read_topic(source_bootstrap, topic, PARTITIONS).values()) == 200 + apps.sent
    assert committed(source_bootstrap, group, topic, PARTITIONS) == {0: 150, 1: 160}
    assert_verified(config, BACK, spark, topic)  # the mirror of the way back, continued in place

    # And us-east follows us-west again: a second generation of the first link's mirror.
    again = engine.reverse(config, BACK, [topic]).mirrors[topic]
    assert again["action"] == "continue" and state(config, FORWARD, topic) == "ACTIVE"
    produce(source_bootstrap, topic, 20, tag="after")
    catch_up(config, FORWARD, spark, topic)
    assert_identical(
        read_topic(source_bootstrap, topic, PARTITIONS), read_topic(destination_bootstrap, topic, PARTITIONS)
    )
    assert_verified(config, FORWARD, spark, topic)


def test_unplanned_failover_saves_the_divergent_tail_then_rebuilds(
    failback_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, tmp_path
):
    path, config, prefix = failback_config
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    group = f"{prefix}-payments"
    produce(source_bootstrap, topic, 100)
    engine.create_mirror(config, FORWARD, topic)
    catch_up(config, FORWARD, spark, topic)
    produce(source_bootstrap, topic, 30, partition=0, tag="lost")  # written, never mirrored: the divergent tail
    tail = read_partition(source_bootstrap, topic, 0)[50:]
    assert len(tail) == 30

    engine.failover(config, FORWARD, [topic])  # the disaster: us-west is cut off before copying them
    apps = Producing(destination_bootstrap, topic, "east")
    apps.start()
    try:
        commit(destination_bootstrap, group, topic, {0: 40, 1: 45})
        preview = engine.reverse(config, FORWARD, [topic], dry_run=True).mirrors[topic]
        assert preview["action"] == "rebuild"
        rows = {p["partition"]: p for p in preview["partitions"]}
        assert (rows[0]["saved_records"], rows[0]["saved_ranges"], rows[1]["saved_records"]) == (30, [[50, 80]], 0)

        home = tmp_path / "dagster-home"
        home.mkdir()
        out = run_cli(home, "mirror", "reverse", topic, "--link", FORWARD, "--config", str(path), "--json", timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        done = json.loads(out.stdout)
        assert done["mirrors"][topic]["saved_topic"] == f"{topic}.diverged"

        saved = read_partition(source_bootstrap, f"{topic}.diverged", 0)
        assert [(r.key, r.value, r.timestamp) for r in saved] == [(r.key, r.value, r.timestamp) for r in tail]
        assert [dict(r.headers)[ORIGIN_HEADER] for r in saved] == [f"{topic}/0/{r.offset}".encode() for r in tail]
        assert [r.headers[:-1] for r in saved] == [r.headers for r in tail]
        assert read_partition(source_bootstrap, f"{topic}.diverged", 1) == []
        for _ in range(2):
            engine.run_cycle(config, BACK, spark, mirrors=[topic])
    finally:
        apps.stop()
    catch_up(config, BACK, spark, topic)

    assert_identical(
        read_topic(destination_bootstrap, topic, PARTITIONS), read_topic(source_bootstrap, topic, PARTITIONS)
    )
    assert engine.describe_mirror(config, BACK, topic).offsets_preserved
    assert_verified(config, BACK, spark, topic)  # the rebuilt mirror
    engine.sync_offsets(config, BACK, [topic])
    assert committed(source_bootstrap, group, topic, PARTITIONS) == {0: 40, 1: 45}
    # A second reverse finds it done and changes nothing.
    assert engine.reverse(config, FORWARD, [topic]).mirrors[topic]["said"].startswith("already reversed")


def test_reverse_refuses_a_mirror_that_still_copies_and_a_config_without_a_way_back(
    failback_config, write_config, spark, source_bootstrap, create_topic, unique_name
):
    path, config, _ = failback_config
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    engine.create_mirror(config, FORWARD, topic)

    with pytest.raises(MirrorRefused, match="is ACTIVE on link 'west-to-east': promote or fail it over first"):
        engine.reverse(config, FORWARD, [topic])
    one_way = load_config(write_config())
    with pytest.raises(MirrorRefused, match="no link copies us-east -> us-west"):
        engine.reverse(one_way, "west-to-east", [topic])
    assert state(config, FORWARD, topic) == "ACTIVE"


def test_reverse_and_pause_then_an_interrupted_reverse_is_finished_by_the_next_one_only(
    failback_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    from mirror_pipeline.link.context import LinkContext
    from mirror_pipeline.operations import reverse as reversing

    path, config, _ = failback_config
    paused, interrupted = (create_topic(source_bootstrap, unique_name(n), partitions=PARTITIONS) for n in ("p", "i"))
    for topic in (paused, interrupted):
        produce(source_bootstrap, topic, 40)
        engine.create_mirror(config, FORWARD, topic)
        catch_up(config, FORWARD, spark, topic)
    produce(source_bootstrap, interrupted, 5, partition=1, tag="tail")
    engine.failover(config, FORWARD, [paused, interrupted])
    produce(destination_bootstrap, paused, 10, tag="east")

    assert engine.reverse(config, FORWARD, [paused], start=False).mirrors[paused]["after"] == "PAUSED"
    assert engine.run_cycle(config, BACK, spark, mirrors=[paused]).records == 0
    engine.resume(config, BACK, [paused])
    catch_up(config, BACK, spark, paused)
    assert_identical(
        read_topic(destination_bootstrap, paused, PARTITIONS), read_topic(source_bootstrap, paused, PARTITIONS)
    )

    # A reverse killed right after recording its plan: the old topic, tail unsaved, is the reverse's alone.
    forward, back = LinkContext.open(config, FORWARD), LinkContext.open(config, BACK)
    stopped = forward.select([interrupted])[0]
    reversing._record_plan(back, stopped, reversing.make_plan(forward, back, stopped, start=True))
    for verb in (
        lambda: engine.failover(config, BACK, [interrupted]),
        lambda: engine.delete_mirrors(config, BACK, [interrupted]),
        lambda: engine.promote(config, BACK, spark, [interrupted], timeout_s=5),
    ):
        with pytest.raises(MirrorRefused, match="being set up by a reverse that did not finish"):
            verb()
    assert engine.run_cycle(config, BACK, spark, mirrors=[interrupted]).records == 0
    tail = read_partition(source_bootstrap, interrupted, 1)[20:]

    done = engine.reverse(config, FORWARD, [interrupted]).mirrors[interrupted]

    assert done["after"] == "ACTIVE" and done["saved_topic"] == f"{interrupted}.diverged"
    assert [r.value for r in read_partition(source_bootstrap, f"{interrupted}.diverged", 1)] == [r.value for r in tail]
    catch_up(config, BACK, spark, interrupted)
    assert_identical(
        read_topic(destination_bootstrap, interrupted, PARTITIONS),
        read_topic(source_bootstrap, interrupted, PARTITIONS),
    )


def test_a_reverse_creates_topics_too_wide_for_one_request_in_steps_and_finishes_an_interrupted_one(
    failback_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin, monkeypatch
):
    """Kafka 4's controller refuses a request over its bound of metadata records whole; the bound
    is lowered to 30 records here, so a topic of 40 partitions is created with what fits and grown in
    steps. The rebuild is cut after its topic's first request: the next reverse grows that topic."""
    from confluent_kafka.admin import AdminClient

    from mirror_pipeline.kafka import controller_requests

    bound, wide = 30, 40
    monkeypatch.setattr(controller_requests, "RECORDS_PER_REQUEST", bound)
    path, config, _ = failback_config
    topic = create_topic(source_bootstrap, unique_name(), partitions=wide)
    produce(source_bootstrap, topic, 2 * wide)
    engine.create_mirror(config, FORWARD, topic)
    catch_up(config, FORWARD, spark, topic)
    produce(source_bootstrap, topic, 5, partition=wide - 1, tag="tail")  # never mirrored: saved by the reverse
    tail = read_partition(source_bootstrap, topic, wide - 1)
    engine.failover(config, FORWARD, [topic])
    produce(destination_bootstrap, topic, wide, tag="east")

    requests: list[int] = []  # metadata records each creation or growth of the test's topics asked for
    counts: dict[str, int] = {}  # partitions of each, as asked
    real_create, real_grow = AdminClient.create_topics, AdminClient.create_partitions

    def create_topics(self, new_topics, **kwargs):
        for t in new_topics:
            if t.topic.startswith(topic):
                requests.append(1 + t.num_partitions + len(t.config or {}))
                counts[t.topic] = t.num_partitions
        return real_create(self, new_topics, **kwargs)

    def create_partitions(self, new_partitions, **kwargs):
        for p in new_partitions:
            if p.topic.startswith(topic):
                requests.append(p.new_total_count - counts[p.topic])
                counts[p.topic] = p.new_total_count
        return real_grow(self, new_partitions, **kwargs)

    monkeypatch.setattr(AdminClient, "create_topics", create_topics)
    monkeypatch.setattr(AdminClient, "create_partitions", create_partitions)
    real_steps = controller_requests.add_partitions

    def cut_before_growing_the_rebuilt_topic(client, name, current, wanted, what):
        if name == topic:
            raise MirrorError("the reverse ended here")
        real_steps(client, name, current, wanted, what)

    monkeypatch.setattr(controller_requests, "add_partitions", cut_before_growing_the_rebuilt_topic)
    with pytest.raises(MirrorError, match="the reverse ended here"):
        engine.reverse(config, FORWARD, [topic])
    monkeypatch.setattr(controller_requests, "add_partitions", real_steps)
    assert counts[topic] < wide  # created with what fit one request, then cut

    done = engine.reverse(config, FORWARD, [topic]).mirrors[topic]

    assert done["after"] == "ACTIVE" and done["saved_topic"] == f"{topic}.diverged"
    assert requests and all(0 < n <= bound for n in requests), requests
    listed = admin(source_bootstrap).list_topics(timeout=10).topics
    assert len(listed[topic].partitions) == len(listed[f"{topic}.diverged"].partitions) == wide
    saved = read_partition(source_bootstrap, f"{topic}.diverged", wide - 1)
    assert [r.value for r in saved] == [r.value for r in tail]
    catch_up(config, BACK, spark, topic)
    assert_identical(read_topic(destination_bootstrap, topic, wide), read_topic(source_bootstrap, topic, wide))
