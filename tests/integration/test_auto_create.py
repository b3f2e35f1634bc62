"""The auto-create scan on the real local pair (R-AC-1..4, R-MT-2).

Every test keeps its link's state in state topics of its own
(`mirror.state.topic`, R-TP-4): the clusters are shared, and the scan, the
health check and `run` act on every mirror of the link they see.
"""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.model.errors import MirrorRefused
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, read_topic


def include(prefix: str) -> dict:
    return {"name": prefix, "patternType": "PREFIXED", "filterType": "INCLUDE"}


def exclude(name: str) -> dict:
    return {"name": name, "patternType": "LITERAL", "filterType": "EXCLUDE"}


def own_state(unique: str) -> dict:
    """Link settings that keep the link's registry and offset maps in topics only this test reads."""
    return {
        "mirror.state.topic": f"_mirror-pipeline.{unique}.state",
        "mirror.offset.map.topic": f"_mirror-pipeline.{unique}.offset-map",
    }


def auto_create(unique: str, *filters: dict, enable: bool = True, **settings) -> dict:
    return {
        "auto.create.mirror.topics.enable": enable,
        "auto.create.mirror.topics.filters": {"topicFilters": list(filters)},
        **own_state(unique),
        **settings,
    }


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def topic_exists(admin, bootstrap: str, topic: str) -> bool:
    return topic in admin(bootstrap).list_topics(timeout=10).topics


def test_scan_creates_mirrors_for_matching_topics_and_not_for_excluded_or_internal_ones(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    u = unique_name()
    keep = create_topic(source_bootstrap, f"{u}-keep", partitions=2)
    skip = create_topic(source_bootstrap, f"{u}-skip")
    internal = create_topic(source_bootstrap, f"{u}.checkpoints.internal")  # MirrorMaker 2's naming
    config = load_config(write_config(auto_create(u, include(u), exclude(skip))))

    first = engine.auto_create(config, LINK)

    assert first.created == [keep]
    assert first.skipped == {internal: "internal topic: never mirrored"}
    assert skip not in first.outcomes  # excluded: not even a candidate
    assert first.errors == {}
    assert topic_exists(admin, destination_bootstrap, keep)
    assert not topic_exists(admin, destination_bootstrap, skip)
    assert not topic_exists(admin, destination_bootstrap, internal)
    assert {m.mirror_topic: m.source_topic for m in engine.list_mirrors(config, LINK)} == {keep: keep}
    assert first.mirrors == {keep: "ACTIVE"}

    # Idempotent: nothing new, the mirror reported as existing.
    again = engine.auto_create(config, LINK)
    assert again.created == [] and again.existing == [keep]

    # A topic that appears after a scan is picked up by the next one.
    later = create_topic(source_bootstrap, f"{u}-later")
    third = engine.auto_create(config, LINK)
    assert third.created == [later]
    assert third.existing == [keep]
    assert sorted(m.mirror_topic for m in engine.list_mirrors(config, LINK)) == sorted([keep, later])
    assert third.to_dict()["created"] == [
        {"source_topic": later, "mirror_topic": later, "outcome": "created", "reason": ""}
    ]


def test_scan_does_nothing_when_auto_create_is_off(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    u = unique_name()
    topic = create_topic(source_bootstrap, f"{u}-t")
    config = load_config(write_config(auto_create(u, include(u), enable=False)))

    result = engine.auto_create(config, LINK)

    assert not result.enabled and result.outcomes == {} and result.created == []
    assert not topic_exists(admin, destination_bootstrap, topic)


def test_an_existing_destination_topic_is_not_taken_over(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    u = unique_name()
    taken = create_topic(source_bootstrap, f"{u}-taken")
    free = create_topic(source_bootstrap, f"{u}-free")
    create_topic(destination_bootstrap, taken)  # a normal topic of the mirror's name
    produce(destination_bootstrap, taken, 3)
    config = load_config(write_config(auto_create(u, include(u))))

    result = engine.auto_create(config, LINK)

    assert result.created == [free]
    assert "already exists on cluster 'us-east'" in result.skipped[taken]
    assert taken not in {m.mirror_topic for m in engine.list_mirrors(config, LINK)}
    # The normal topic keeps its own records.
    assert len(read_topic(destination_bootstrap, taken, 1)[0]) == 3
    assert engine.auto_create(config, LINK).skipped.keys() == {taken}


def test_prefixed_link_names_mirrors_with_the_prefix_and_never_chains_a_mirror(
    tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    """`cluster.link.prefix=west.`: `orders` -> `west.orders` (R-MT-2); a source topic that is
    itself a mirror on the source cluster (here of link east-to-west) is skipped (R-AC-3)."""
    import yaml

    u = unique_name()
    orders = create_topic(source_bootstrap, f"{u}-orders", partitions=2)
    produce(source_bootstrap, orders, 20, partitions=2)
    upstream = create_topic(destination_bootstrap, f"{u}-upstream")
    path = tmp_path / "mirror.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "us-west": {"bootstrap.servers": source_bootstrap},
                    "us-east": {"bootstrap.servers": destination_bootstrap},
                },
                "defaults": own_state(u),
                "links": {
                    LINK: {
                        "source": "us-west",
                        "destination": "us-east",
                        "cluster.link.prefix": "west.",
                        **auto_create(u, include(u)),
                    },
                    "east-to-west": {"source": "us-east", "destination": "us-west"},
                },
            }
        )
    )
    config = load_config(path)
    # `<u>-upstream` on us-west is a mirror of us-east's topic.
    engine.create_mirror(config, "east-to-west", upstream)

    result = engine.auto_create(config, LINK)

    assert result.created == [f"west.{orders}"]
    assert "itself a mirror on cluster 'us-west'" in result.skipped[upstream]
    assert not topic_exists(admin, destination_bootstrap, f"west.{upstream}")
    engine.run_cycle(config, LINK, spark, mirrors=[f"west.{orders}"])
    assert_identical(read_topic(source_bootstrap, orders, 2), read_topic(destination_bootstrap, f"west.{orders}", 2))

    # Failed over, the upstream mirror is a normal topic: now it may be mirrored.
    engine.failover(config, "east-to-west", [upstream])
    assert engine.auto_create(config, LINK).created == [f"west.{upstream}"]


def test_deleting_a_mirror_the_filters_still_select_is_refused_with_the_ways_out(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    u = unique_name()
    first = create_topic(source_bootstrap, f"{u}-first")
    second = create_topic(source_bootstrap, f"{u}-second")
    gone = create_topic(source_bootstrap, f"{u}-gone")
    config = load_config(write_config(auto_create(u, include(u), **{"cluster.link.retry.timeout.ms": 1})))
    assert sorted(engine.auto_create(config, LINK).created) == sorted([first, second, gone])

    with pytest.raises(MirrorRefused) as refused:
        engine.delete_mirrors(config, LINK, [first, second])
    message = str(refused.value)
    assert f"'{first}'" in message and f"'{second}'" in message
    assert "delete the source topic first" in message and "FAILED" in message
    assert "EXCLUDE" in message and "auto.create.mirror.topics.enable off" in message
    # Refused means nothing changed.
    assert {m.mirror_topic for m in engine.list_mirrors(config, LINK)} == {first, second, gone}
    assert topic_exists(admin, destination_bootstrap, first)

    excluded = load_config(write_config(auto_create(u, include(u), exclude(first))))
    assert engine.delete_mirrors(excluded, LINK, [first]).mirrors[first]["after"] == "DELETED"

    off = load_config(write_config(auto_create(u, include(u), enable=False)))
    assert engine.delete_mirrors(off, LINK, [second]).mirrors[second]["after"] == "DELETED"
    assert not topic_exists(admin, destination_bootstrap, second)

    # Source deleted and the mirror FAILED: it may go although the filters select its name.
    admin(source_bootstrap).delete_topics([gone])[gone].result(timeout=30)
    deadline = time.monotonic() + 60
    while engine.check_health(config, LINK)[gone] != "FAILED":
        assert time.monotonic() < deadline, "mirror never became FAILED"
        time.sleep(0.5)
    assert engine.delete_mirrors(config, LINK, [gone]).mirrors[gone]["after"] == "DELETED"
    assert engine.list_mirrors(config, LINK) == []


def test_run_creates_mirrors_for_new_topics_before_its_cycle(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    u = unique_name()
    old = create_topic(source_bootstrap, f"{u}-old")
    produce(source_bootstrap, old, 5)
    path = write_config(auto_create(u, include(u)))
    runner = CliRunner()

    first = runner.invoke(cli, ["run", "--link", LINK, "--config", str(path), "--json"])
    assert first.exit_code == 0, first.output
    out = json.loads(first.output)
    assert [c["mirror_topic"] for c in out["auto_create"]["created"]] == [old]
    assert out["mirrors"][old]["records"] == 5

    new = create_topic(source_bootstrap, f"{u}-new", partitions=3)
    produce(source_bootstrap, new, 30, partitions=3)
    second = runner.invoke(cli, ["run", "--link", LINK, "--config", str(path)])

    assert second.exit_code == 0, second.output
    assert "auto-create: 1 mirror(s) created, 1 existing" in second.output
    assert f"created {new} (from {new})" in second.output
    assert_identical(read_topic(source_bootstrap, new, 3), read_topic(destination_bootstrap, new, 3))


def test_many_mirrors_are_created_at_once_and_a_refused_one_stops_none_of_the_others(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    """`bulk_create`: the batch path for topics it can decide together, `create_mirror` for the rest."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    from mirror_pipeline.link.context import LinkContext
    from mirror_pipeline.operations.bulk_create import create_mirrors

    u = unique_name()
    batch = [
        create_topic(
            source_bootstrap,
            f"{u}-{i}",
            partitions=1 + i % 3,
            config={"retention.ms": str(3_600_000 + i), "cleanup.policy": "compact" if i == 2 else "delete"},
        )
        for i in range(6)
    ]
    taken = create_topic(source_bootstrap, f"{u}-taken")
    create_topic(destination_bootstrap, taken)  # a normal topic of that name on the destination
    config = load_config(write_config(own_state(u)))
    ctx = LinkContext.open(config, LINK)

    made = create_mirrors(ctx, [(t, t) for t in batch] + [(taken, taken), (f"{u}-gone", f"{u}-gone")])

    assert all(made[t][1] is True for t in batch), made
    assert isinstance(made[taken], MirrorRefused) and "normal topic is never turned into a mirror" in str(made[taken])
    assert "does not exist" in str(made[f"{u}-gone"])
    assert sorted(m.mirror_topic for m in engine.list_mirrors(config, LINK)) == sorted(batch)
    dest = admin(destination_bootstrap)
    metadata = dest.list_topics(timeout=10).topics
    for i, topic in enumerate(batch):
        assert len(metadata[topic].partitions) == 1 + i % 3
    resource = ConfigResource(ResourceType.TOPIC, batch[2])
    configs = dest.describe_configs([resource])[resource].result()
    assert (configs["cleanup.policy"].value, configs["retention.ms"].value) == ("compact", str(3_600_002))
    # Created again: nothing new, each reported as existing.
    again = create_mirrors(ctx, [(t, t) for t in batch])
    assert all(again[t][1] is False for t in batch)


def test_a_topic_created_though_its_answer_timed_out_keeps_its_mirror(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    """A CreateTopics answer lost to a timeout, though the controller created the topic (a wide
    scan on a slow controller): unregistering that mirror would leave a topic every later scan
    refuses as "already exists". It is kept, as created; a refused create is still unregistered."""
    from concurrent.futures import Future

    from confluent_kafka import KafkaError, KafkaException

    from mirror_pipeline.link.context import LinkContext
    from mirror_pipeline.operations.bulk_create import create_mirrors

    u = unique_name()
    slow, refused = create_topic(source_bootstrap, f"{u}-slow", partitions=2), create_topic(source_bootstrap, f"{u}-no")
    config = load_config(write_config(own_state(u)))
    ctx = LinkContext.open(config, LINK)
    admin = ctx.dest_admin
    create_topics = admin.create_topics

    def answer_lost(new_topics, **kwargs):
        if not {t.topic for t in new_topics} & {slow, refused}:
            return create_topics(new_topics, **kwargs)  # the link's own state topics
        futures = create_topics([t for t in new_topics if t.topic == slow], **kwargs)
        futures[slow].result(30)  # created on the broker; the client is told it timed out
        answers = {}
        for topic, error in ((slow, KafkaError._TIMED_OUT), (refused, KafkaError.POLICY_VIOLATION)):
            answers[topic] = Future()
            answers[topic].set_exception(KafkaException(KafkaError(error)))
        return answers

    admin.create_topics = answer_lost
    made = create_mirrors(ctx, [(slow, slow), (refused, refused)])

    assert made[slow][1] is True, made
    assert isinstance(made[refused], MirrorRefused) and "POLICY_VIOLATION" in str(made[refused])
    assert [m.mirror_topic for m in engine.list_mirrors(config, LINK)] == [slow]
    admin.create_topics = create_topics
    assert create_mirrors(ctx, [(slow, slow)])[slow][1] is False  # the next scan finds it registered


def test_topics_too_wide_for_one_request_are_created_and_grown_in_steps(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin, monkeypatch
):
    """Kafka 4's controller refuses, whole, a request of more than 10,000 metadata records (a topic,
    each partition, each config: one each), so 100 topics of 100 partitions, or one of 10,000, were
    never mirrored. With the bound at 30 records here (a mirror carries 19 configs): topics are
    created in requests that fit it, one too wide for a request starts with what fits, and
    partitions are added in steps."""
    from confluent_kafka.admin import NewPartitions

    from mirror_pipeline.kafka import controller_requests
    from mirror_pipeline.link.context import LinkContext
    from mirror_pipeline.link.partitions import grow_partitions
    from mirror_pipeline.operations.bulk_create import create_mirrors
    from mirror_pipeline.operations.mirrors import create_mirror

    bound = 30
    monkeypatch.setattr(controller_requests, "RECORDS_PER_REQUEST", bound)
    u = unique_name()
    small = [create_topic(source_bootstrap, f"{u}-s{i}", partitions=3) for i in range(3)]
    wide = create_topic(source_bootstrap, f"{u}-wide", partitions=75)
    alone = create_topic(source_bootstrap, f"{u}-alone", partitions=45)
    config = load_config(write_config(own_state(u)))
    ctx = LinkContext.open(config, LINK)
    dest_admin = ctx.dest_admin
    real_create, real_grow = dest_admin.create_topics, dest_admin.create_partitions
    creates: list[dict[str, tuple[int, int]]] = []  # per request: topic -> (partitions, configs)
    grows: list[tuple[str, int]] = []

    def create_topics(new_topics, **kwargs):
        mine = {t.topic: (t.num_partitions, len(t.config or {})) for t in new_topics if t.topic.startswith(u)}
        if mine:
            creates.append(mine)
        return real_create(new_topics, **kwargs)

    def create_partitions(new_partitions, **kwargs):
        grows.extend((p.topic, p.new_total_count) for p in new_partitions)
        return real_grow(new_partitions, **kwargs)

    dest_admin.create_topics, dest_admin.create_partitions = create_topics, create_partitions

    made = create_mirrors(ctx, [(t, t) for t in [*small, wide]])
    assert all(made[t][1] is True for t in [*small, wide]), made
    assert create_mirror(ctx, alone, alone)[1] is True
    admin(source_bootstrap).create_partitions([NewPartitions(small[0], 70)])[small[0]].result(30)
    assert grow_partitions(ctx, ctx.registry()[small[0]]) == (70, 67)

    assert all(sum(1 + n + c for n, c in request.values()) <= bound for request in creates), creates
    assert len(creates) > 2  # the three small topics did not fit one request beside the wide one
    created = {topic: n for request in creates for topic, (n, _) in request.items()}
    assert created[wide] < 75 and created[alone] < 45
    assert len(grows) >= 7  # 75 and 45 from what fit, and the source's growth to 70, 30 at most a step
    start = {**created, small[0]: 3}
    for topic, total in grows:
        assert 0 < total - start[topic] <= bound, (topic, total, start[topic])
        start[topic] = total
    metadata = admin(destination_bootstrap).list_topics(timeout=10).topics
    counts = {t: len(metadata[t].partitions) for t in [*small, wide, alone]}
    assert counts == {small[0]: 70, small[1]: 3, small[2]: 3, wide: 75, alone: 45}
    assert sorted(m.mirror_topic for m in engine.list_mirrors(config, LINK)) == sorted([*small, wide, alone])


def test_partitions_added_are_listed_when_growing_returns_and_read_by_clients_that_cached_fewer(
    destination_bootstrap, create_topic, unique_name, admin
):
    """A broker answers metadata from a cache that catches up with the controller a moment after
    new partitions are taken, and a client keeps the partition count it was told: a consumer
    that had asked about the topic before it grew was told 'unknown partition' for every new one
    until its metadata refreshed on its own, minutes later (a reverse saving divergent records
    to a topic it had just grown failed that way). Growing ends once the new partitions are
    listed, and reading a partition's offsets asks for the topic's metadata again when the
    partition is unknown."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    from mirror_pipeline.kafka import clients as kc
    from mirror_pipeline.kafka.controller_requests import add_partitions

    topic = create_topic(destination_bootstrap, unique_name(), partitions=30)
    reader = Consumer({"bootstrap.servers": destination_bootstrap, "group.id": unique_name("g")})
    try:
        assert kc.watermark(reader, topic, 29) == (0, 0)  # the reader now caches 30 partitions
        add_partitions(admin(destination_bootstrap), topic, 30, 40, "growing the test topic failed")
        assert kc.topic_partitions(AdminClient({"bootstrap.servers": destination_bootstrap}), topic, "east") == 40
        assert kc.watermark(reader, topic, 39) == (0, 0)
    finally:
        reader.close()


def test_a_mirror_whose_topic_is_not_listed_yet_is_left_alone_and_one_created_half_way_is_completed(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    """A broker lists a new topic a moment after the controller made it (on a new wide link, long
    moments): such a mirror exists, and the scan neither creates nor probes it again (it did so one
    mirror at a time, 20-40 ms each). A mirror registered by a create that stopped before its
    topic was made still gets its topic."""
    from mirror_pipeline.kafka.controller_requests import held_by_controller
    from mirror_pipeline.link.context import LinkContext
    from mirror_pipeline.operations import auto_create as scans

    u = unique_name()
    late, half_way = create_topic(source_bootstrap, f"{u}-late"), create_topic(source_bootstrap, f"{u}-half")
    produce(source_bootstrap, half_way, 3)
    config = load_config(write_config(auto_create(u, include(f"{u}-"))))
    assert sorted(engine.auto_create(config, LINK).created) == sorted([late, half_way])
    dest = admin(destination_bootstrap)
    dest.delete_topics([half_way])[half_way].result(30)
    deadline = time.monotonic() + 30
    while half_way in dest.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)

    ctx = LinkContext.open(config, LINK)
    list_topics, create_topics = ctx.dest_admin.list_topics, ctx.dest_admin.create_topics
    created: list[str] = []

    def not_listing_late(*args, **kwargs):
        metadata = list_topics(*args, **kwargs)
        metadata.topics.pop(late, None)  # as a broker the controller has not told yet
        return metadata

    def creating(new_topics, **kwargs):
        if not kwargs.get("validate_only"):
            created.extend(t.topic for t in new_topics)
        return create_topics(new_topics, **kwargs)

    ctx.dest_admin.list_topics, ctx.dest_admin.create_topics = not_listing_late, creating
    result = scans.scan(ctx)

    assert result.outcomes[late].outcome == scans.EXISTING
    assert "does not list its topic yet" in result.outcomes[late].reason
    assert result.outcomes[half_way].outcome == scans.CREATED, result.outcomes[half_way]
    assert late not in created and half_way in created
    assert half_way in dest.list_topics(timeout=10).topics
    # What the scan asks the controller creates nothing.
    assert held_by_controller(dest, [late, f"{u}-never"]) == {late}
    assert f"{u}-never" not in dest.list_topics(timeout=10).topics
