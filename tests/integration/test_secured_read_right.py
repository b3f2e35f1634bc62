"""A source principal that may DESCRIBE a topic but not READ it, on the secured pair (R-MT-1, R-AC-3, R-LC-5).

Metadata and ListOffsets need only DESCRIBE, so these checks alone let
`mirror create` through for a topic the link cannot read, and a mirror whose
READ right was revoked while it had no lag copied nothing, exited 0 and
stayed ACTIVE for ever. Here the right is revoked with the admin client's
`delete_acls`, and a consumer with the link's source credentials is shown to
be refused a Fetch (TOPIC_AUTHORIZATION_FAILED) before anything is asked of
the pipeline:

- create (one topic, and a batch) refuses it naming the topic, the
  principal and the missing READ, and changes nothing; auto-create skips it;
- every cycle reports it, also with no lag; the right restored before
  `cluster.link.retry.timeout.ms` lets the mirror go on ACTIVE; past it the
  mirror is FAILED with the reason in describe, copies nothing, cannot be
  resumed, and failover makes it a normal topic.
"""

from __future__ import annotations

import time
import uuid

import pytest
import yaml
from click.testing import CliRunner
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import acls, topic_shares
from mirror_pipeline.link import read_probe
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.required_acls import bindings, grants_from_dicts
from mirror_pipeline.model.errors import MirrorRefused
from mirror_pipeline.operations.bulk_create import create_mirrors
from tests.secured_link import LINK, PARTITIONS, grant, produce, settings

# How long a revoked or restored right may take to reach every broker's authorizer.
ACL_SETTLE_S = 60.0


def read_binding(principals: dict, topic: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        f"User:{principals['src']}",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


def fetch_refused(props: dict, topic: str, timeout: float = 15.0) -> bool | None:
    """Whether a plain consumer with `props` is refused a Fetch of `topic` (None: no answer in time)."""
    cons = Consumer(
        {**props, "group.id": f"mirror-pipeline.{LINK}.test", "enable.auto.commit": False, "enable.partition.eof": True}
    )
    try:
        cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in cons.consume(10, 0.5):
                err = msg.error()
                if err is None or err.code() == KafkaError._PARTITION_EOF:
                    return False
                if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    return True
        return None
    finally:
        cons.close()


def revoke_read(secure_kafka, secured_link, principals, topic: str) -> None:
    """Delete the link's READ on `topic` and wait until a consumer with its credentials is refused."""
    b = read_binding(principals, topic)
    flt = AclBindingFilter(
        b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
    )
    deleted = secured_link["west"].delete_acls([flt])[flt].result(30)
    assert [acls.binding_key(d) for d in deleted] == [acls.binding_key(b)]
    _until(lambda: fetch_refused(settings(secure_kafka, principals["src"], 0), topic) is True, "READ revoked")


def restore_read(secure_kafka, secured_link, principals, topic: str) -> None:
    grant(secured_link["west"], "us-west", [read_binding(principals, topic)])
    _until(lambda: fetch_refused(settings(secure_kafka, principals["src"], 0), topic) is False, "READ restored")


def _until(check, what: str, timeout: float = ACL_SETTLE_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not seen within {timeout:.0f}s"
        time.sleep(0.5)


def link_config(secured_link, **link_settings):
    """The secured link's config with more link settings, in a file of its own (same link, same state)."""
    data = yaml.safe_load(secured_link["path"].read_text())
    data["links"][LINK].update(link_settings)
    path = secured_link["path"].with_name(f"mirror-{uuid.uuid4().hex[:8]}.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(path, env={**secured_link["env"]})


def says_read_is_missing(text: str, topic: str, principals: dict) -> bool:
    return all(
        part in text
        for part in (
            f"'{topic}'",
            "cluster 'us-west'",
            f"User:{principals['src']}",
            "TOPIC_AUTHORIZATION_FAILED",
            "needs READ on the topic",
            "link acls",
        )
    )


def east_topics(secured_link) -> set[str]:
    return set(secured_link["east"].list_topics(timeout=15).topics)


def new_source_topics(secure_kafka, secured_link, config, names: list[str]) -> None:
    """Source topics with records, and the link's least privilege on them (both principals)."""
    west = secured_link["west"]
    for fut in west.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        fut.result(30)
    for name in names:
        assert produce(settings(secure_kafka, "admin", 0), name, 10) == []
    needed = engine.required_acls(config, LINK, names, [])
    src, dst = (f"User:{secured_link['principals'][side]}" for side in ("src", "dst"))
    grant(west, "us-west", bindings(grants_from_dicts(needed["source"]), src))
    grant(secured_link["east"], "us-east", bindings(grants_from_dicts(needed["destination"]), dst))


@pytest.fixture
def link(secured_link, principals):
    return {**secured_link, "principals": principals}


def test_create_refuses_a_topic_the_link_may_describe_but_not_read(secure_kafka, principals, link):
    config, topic = link["config"], link["topic"]
    revoke_read(secure_kafka, link, principals, topic)

    with pytest.raises(MirrorRefused) as refused:
        engine.create_mirror(config, LINK, topic)
    assert says_read_is_missing(str(refused.value), topic, principals), refused.value
    result = CliRunner().invoke(
        cli, ["mirror", "create", topic, "--link", LINK, "--config", str(link["path"])], env=link["env"]
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert says_read_is_missing(lines[0], topic, principals), lines[0]
    assert not any(secret in result.output for secret in link["env"].values())
    # Nothing was created: no mirror topic, not even the link's state topic.
    assert not {topic, f"_{link['tag']}.state"} & east_topics(link)

    restore_read(secure_kafka, link, principals, topic)
    info = engine.create_mirror(config, LINK, topic)
    assert info.state == "ACTIVE" and topic in east_topics(link)


def test_a_batch_and_auto_create_leave_out_only_the_unreadable_topic(secure_kafka, spark, principals, link):
    tag = link["tag"]
    batched, denied, scanned = (f"rr-{tag}-{what}" for what in ("batched", "denied", "scanned"))
    new_source_topics(secure_kafka, link, link["config"], [batched, denied])
    revoke_read(secure_kafka, link, principals, denied)

    made = create_mirrors(LinkContext.open(link["config"], LINK), [(batched, batched), (denied, denied)])
    assert made[batched][1] is True
    assert isinstance(made[denied], MirrorRefused) and says_read_is_missing(str(made[denied]), denied, principals)
    assert batched in east_topics(link) and denied not in east_topics(link)
    assert [m.mirror_topic for m in engine.list_mirrors(link["config"], LINK)] == [batched]

    new_source_topics(secure_kafka, link, link["config"], [scanned])
    config = link_config(
        link,
        **{
            "auto.create.mirror.topics.enable": True,
            "auto.create.mirror.topics.filters": {
                "topicFilters": [{"name": f"rr-{tag}-", "patternType": "PREFIXED", "filterType": "INCLUDE"}]
            },
        },
    )
    preview = engine.auto_create(config, LINK, dry_run=True)
    assert preview.to_create == [scanned] and set(preview.skipped) == {denied}
    scan = engine.auto_create(config, LINK)
    assert scan.created == [scanned] and scan.existing == [batched] and scan.errors == {}
    assert says_read_is_missing(scan.skipped[denied], denied, principals), scan.skipped
    assert denied not in east_topics(link) and denied not in scan.mirrors
    assert engine.run_cycle(config, LINK, spark).records == 20  # the two readable mirrors copy


def test_a_probe_through_several_consumers_finds_the_one_unreadable_topic(secure_kafka, principals, link, monkeypatch):
    names = [f"rp-{link['tag']}-{i}" for i in range(3)]
    new_source_topics(secure_kafka, link, link["config"], names)
    revoke_read(secure_kafka, link, principals, names[1])
    ctx = LinkContext.open(link["config"], LINK)
    opened = []
    consumer = read_probe.kc.consumer

    def counted(conf):
        opened.append(conf)
        return consumer(conf)

    # A consumer per topic, as on a link of 1,000 topics each consumer takes 250 of them.
    monkeypatch.setattr(topic_shares, "TOPICS_PER_CONSUMER", 1)
    monkeypatch.setattr(read_probe.kc, "consumer", counted)
    found = read_probe.probe(ctx, names)

    assert len(opened) == 3
    assert list(found.denied) == [names[1]] and found.unanswered == []
    assert says_read_is_missing(read_probe.cannot_read(ctx, names[1], found.denied[names[1]]), names[1], principals)


def test_a_revoked_read_right_is_noticed_without_lag_and_fails_the_mirror_after_the_retry_timeout(
    secure_kafka, spark, principals, link
):
    topic = link["topic"]
    patient = link["config"]  # the default retry timeout (5 minutes): never reached here
    engine.create_mirror(patient, LINK, topic)
    assert engine.run_cycle(patient, LINK, spark, mirrors=[topic]).records == 200  # no lag left

    revoke_read(secure_kafka, link, principals, topic)
    for _ in range(2):  # every cycle says so, although there is nothing to copy
        with pytest.raises(engine.CycleFailed) as failed:
            engine.run_cycle(patient, LINK, spark, mirrors=[topic])
        assert says_read_is_missing(failed.value.errors[topic], topic, principals), failed.value.errors
    noted = engine.describe_mirror(patient, LINK, topic).mirror
    assert noted.state == "ACTIVE" and noted.failing_since > 0 and "needs READ" in noted.reason

    # Restored before the retry timeout: the mirror goes on.
    restore_read(secure_kafka, link, principals, topic)
    assert produce(settings(secure_kafka, "admin", 0), topic, 10, start=200) == []
    assert engine.run_cycle(patient, LINK, spark, mirrors=[topic]).records == 10
    going_on = engine.describe_mirror(patient, LINK, topic).mirror
    assert going_on.state == "ACTIVE" and going_on.failing_since == 0

    # Revoked for longer than a short retry timeout: FAILED, with the reason.
    hasty = link_config(link, **{"cluster.link.retry.timeout.ms": 2000})
    revoke_read(secure_kafka, link, principals, topic)
    assert engine.check_health(hasty, LINK)[topic] == "ACTIVE"  # the health job notices it too, with no cycle
    noted = engine.describe_mirror(hasty, LINK, topic).mirror
    assert noted.failing_since > 0 and says_read_is_missing(noted.reason, topic, principals), noted
    deadline = time.monotonic() + 180
    while engine.describe_mirror(hasty, LINK, topic).mirror.state != "FAILED":
        assert time.monotonic() < deadline, engine.describe_mirror(hasty, LINK, topic).mirror
        with pytest.raises(engine.CycleFailed, match="needs READ"):
            engine.run_cycle(hasty, LINK, spark, mirrors=[topic])
        time.sleep(0.5)
    failed_mirror = engine.describe_mirror(hasty, LINK, topic)
    assert says_read_is_missing(failed_mirror.mirror.reason, topic, principals), failed_mirror.mirror.reason
    assert failed_mirror.mirror.history[-1][1:3] == ("ACTIVE", "FAILED")

    # A FAILED mirror copies nothing (even with the right back), is not resumed, and failover ends it (R-LC-5).
    restore_read(secure_kafka, link, principals, topic)
    assert produce(settings(secure_kafka, "admin", 0), topic, 5, start=210) == []
    assert engine.run_cycle(hasty, LINK, spark, mirrors=[topic]).records == 0
    assert engine.describe_mirror(hasty, LINK, topic).mirror.state == "FAILED"
    with pytest.raises(MirrorRefused, match="FAILED"):
        engine.resume(hasty, LINK, [topic])
    assert engine.failover(hasty, LINK, [topic]).mirrors[topic]["after"] == "STOPPED"
