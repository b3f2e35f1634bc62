"""Every right `mirror-pipeline link acls` lists, used end to end on the secured pair (R-ACL-3, R-LC-6, R-LC-7).

The principals hold exactly the grants `link acls --json` prints (granted
from that output, nothing broader), and each step a user takes is checked by
its outcome, not by its exit code. What test_secured_link.py and
test_secured_read_right.py already show (create, copy, offset sync, promote,
the write guard at create, auto-create) is not repeated; here:

- forward link: log-start alignment (DELETE: DeleteRecords on the mirror),
  partition growth (ALTER on the mirror), config sync (ALTER_CONFIGS), the
  write guard's DENY for a grant made after the mirror exists (DESCRIBE and
  ALTER on the cluster, at config sync), and `mirror delete` (DELETE);
- ACL sync with `acl.sync.enable` (DESCRIBE on the source cluster, ALTER on
  the destination's);
- failback: an unplanned failover, then `reverse` onto the reverse link,
  which rebuilds the old source (saving its divergent tail, deleting and
  creating it as a mirror of the reverse link) and copies the records back;
  then promote on the reverse link and reverse again, continuing in place.
  Each cluster's user then holds the grants of both links (the source grants
  of one, the destination grants of the other).
"""

from __future__ import annotations

import json
import time
import uuid

import yaml
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import acls
from mirror_pipeline.link.required_acls import bindings, grants_from_dicts
from tests.integration.test_failback import catch_up
from tests.kafka_records import assert_identical, read_partition, read_topic
from tests.secured_link import LINK, PARTITIONS, grant, produce, settings

BACK = "secured-back"
ACL_SETTLE_S = 30.0


def run_cli(env: dict, *args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.output


def link_acls(link: dict, name: str, topics: list[str], groups: list[str], path=None) -> dict:
    """What `mirror-pipeline link acls NAME --json` prints for these topics and groups."""
    args = ["link", "acls", name, "--config", str(path or link["path"]), "--json"]
    args += [a for t in topics for a in ("--topic", t)] + [a for g in groups for a in ("--group", g)]
    return json.loads(run_cli(link["env"], *args))


def grant_printed(link: dict, principals: dict, printed: dict, source: str, destination: str) -> None:
    """Grant the printed source grants on `source` to its user, the destination grants likewise."""
    for side, alias in (("source", source), ("destination", destination)):
        admin, user = (link["west"], principals["src"]) if alias == "us-west" else (link["east"], principals["dst"])
        grant(admin, alias, bindings(grants_from_dicts(printed[side]), f"User:{user}"))


def with_link_settings(link: dict, name: str, **settings) -> tuple:
    """The secured link's config file with `settings` added to link `name` (created when new)."""
    data = yaml.safe_load(link["path"].read_text())
    data["links"].setdefault(name, {}).update(settings)
    path = link["path"].with_name(f"mirror-{uuid.uuid4().hex[:8]}.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, load_config(path, env={**link["env"]})


def topic_config(admin, topic: str, key: str) -> str:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(30)[key].value


def log_start(props: dict, topic: str, partition: int) -> int:
    cons = Consumer({**props, "group.id": f"test-wm-{uuid.uuid4().hex[:6]}"})
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)[0]
    finally:
        cons.close()


def until(check, what: str, timeout: float = ACL_SETTLE_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not seen within {timeout:.0f}s"
        time.sleep(0.3)


def bindings_on(admin, alias: str, topic: str) -> set:
    flt = AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    return {acls.binding_key(b) for b in acls.describe_bindings(admin, alias, flt)}


def test_alignment_growth_config_sync_late_guard_and_delete_with_the_listed_rights(
    secure_kafka, spark, principals, secured_link
):
    link, topic, group = secured_link, secured_link["topic"], secured_link["group"]
    # The fixture granted from the same code; grant what the CLI prints too (idempotent: nothing broader).
    grant_printed(link, principals, link_acls(link, LINK, [topic], [group]), "us-west", "us-east")
    config = link["config"]
    west, east = settings(secure_kafka, "admin", 0), settings(secure_kafka, "admin", 1)

    # The source's log start is past 0: the mirror's first copy aligns its log start (placeholders, then DELETE).
    before = TopicPartition(topic, 0, 30)
    for fut in link["west"].delete_records([before]).values():
        fut.result(30)
    engine.create_mirror(config, LINK, topic)
    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).records == 170
    assert log_start(east, topic, 0) == 30
    assert_identical(read_topic(west, topic, PARTITIONS), read_topic(east, topic, PARTITIONS))

    # The source grows a partition and changes a config: the cycle adds the partition (ALTER),
    # config sync copies the value (ALTER_CONFIGS).
    link["west"].create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    producer = Producer({**west, "linger.ms": 5})
    for i in range(7):
        producer.produce(topic, key=b"new%d" % i, value=b"p2-%d" % i, partition=2)
    assert producer.flush(30) == 0
    alter = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "5400000", incremental_operation=AlterConfigOpType.SET)],
    )
    for fut in link["west"].incremental_alter_configs([alter]).values():
        fut.result(30)
    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).records == 7
    assert len(link["east"].list_topics(topic, timeout=15).topics[topic].partitions) == 3
    assert_identical(read_topic(west, topic, 3), read_topic(east, topic, 3))
    engine.sync_configs(config, LINK)
    assert topic_config(link["east"], topic, "retention.ms") == "5400000"

    # An application granted WRITE on every topic after the mirror exists: config sync denies it the mirror.
    app = f"User:{principals['app']}"
    grant(
        link["east"],
        "us-east",
        [
            AclBinding(
                ResourceType.TOPIC,
                "*",
                ResourcePatternType.LITERAL,
                app,
                "*",
                AclOperation.WRITE,
                AclPermissionType.ALLOW,
            )
        ],
    )
    engine.sync_configs(config, LINK)
    until(lambda: _has_deny(link, topic, app), "the DENY for the application")
    refused = produce(settings(secure_kafka, principals["app"], 1), topic, 3, start=5000)
    assert refused and {e.code() for e in refused} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}, refused
    assert sum(len(r) for r in read_topic(east, topic, 3).values()) == 177  # nothing foreign landed

    # `mirror delete` (DELETE on the mirror): the topic is gone from the destination, the link forgets it.
    run_cli(link["env"], "mirror", "delete", topic, "--link", LINK, "--config", str(link["path"]))
    until(lambda: topic not in link["east"].list_topics(timeout=15).topics, "the mirror topic deleted")
    assert engine.list_mirrors(config, LINK) == []
    assert topic in link["west"].list_topics(timeout=15).topics  # the source is untouched
    # The guard's DENY went with the mirror: a topic of that name made later is not locked for the
    # application by a binding no record lists. (The link's own grants on the name are the operator's.)
    until(
        lambda: {k.principal for k in bindings_on(link["east"], "us-east", topic)} == {f"User:{principals['dst']}"},
        "the guard's bindings lifted",
    )


def _has_deny(link: dict, topic: str, app: str) -> bool:
    return any(
        k.principal == app and k.permission_type == "deny" and k.operation == "write"
        for k in bindings_on(link["east"], "us-east", topic)
    )


def test_acl_sync_with_the_listed_rights(secure_kafka, principals, secured_link):
    link, topic = secured_link, secured_link["topic"]
    reader = f"User:reader-{uuid.uuid4().hex[:8]}"
    filters = json.dumps({"aclFilters": [{"accessFilter": {"principal": reader}}]})
    path, config = with_link_settings(link, LINK, **{"acl.sync.enable": True, "acl.filters": filters})
    printed = link_acls(link, LINK, [topic], [link["group"]], path=path)
    assert {"DESCRIBE"} == {op for g in printed["source"] if g["resource"] == "cluster" for op in g["operations"]}
    grant_printed(link, principals, printed, "us-west", "us-east")

    wanted = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, reader, "*", AclOperation.READ, AclPermissionType.ALLOW
    )
    grant(link["west"], "us-west", [wanted])
    result = engine.sync_acls(config, LINK)
    assert [c["principal"] for c in result.to_dict()["created"]] == [reader], result.to_dict()
    until(lambda: acls.binding_key(wanted) in bindings_on(link["east"], "us-east", topic), "the synced binding")

    acls.delete_bindings(link["west"], "us-west", [wanted])
    until(lambda: acls.binding_key(wanted) not in bindings_on(link["west"], "us-west", topic), "the removal")
    assert len(engine.sync_acls(config, LINK).to_dict()["deleted"]) == 1
    until(lambda: acls.binding_key(wanted) not in bindings_on(link["east"], "us-east", topic), "the synced removal")


def test_failover_reverse_rebuild_copy_back_and_reverse_again_with_the_listed_rights(
    secure_kafka, spark, principals, secured_link
):
    link, topic, group, tag = secured_link, secured_link["topic"], secured_link["group"], secured_link["tag"]
    west, east = settings(secure_kafka, "admin", 0), settings(secure_kafka, "admin", 1)
    groups = {"groupFilters": [{"name": group, "patternType": "LITERAL"}]}
    path, config = with_link_settings(
        link,
        BACK,
        **{
            "source": "us-east",
            "destination": "us-west",
            "consumer.offset.sync.enable": True,
            "consumer.offset.group.filters": groups,
            **{
                f"mirror.{kind}.topic": f"_{tag}.back.{kind.replace('.', '-')}"
                for kind in ("state", "offset.map", "checkpoints")
            },
        },
    )
    # Each cluster's user holds the source grants of one link and the destination grants of the other.
    grant_printed(link, principals, link_acls(link, LINK, [topic], [group], path), "us-west", "us-east")
    grant_printed(link, principals, link_acls(link, BACK, [topic], [group], path), "us-east", "us-west")

    engine.create_mirror(config, LINK, topic)
    catch_up(config, LINK, spark, topic)
    # The old source takes 10 records the mirror never gets, then the link fails over (unplanned).
    assert produce(west, topic, 10, start=200) == []
    assert engine.failover(config, LINK, [topic]).mirrors[topic]["after"] == "STOPPED"
    assert produce(east, topic, 30, start=300) == []  # the applications moved to us-east
    tail = {p: [r for r in recs if r.offset >= 100] for p, recs in read_topic(west, topic, PARTITIONS).items()}
    assert sum(map(len, tail.values())) == 10

    done = engine.reverse(config, LINK, [topic]).mirrors[topic]
    assert (done["after"], done["new_mirror"], done["reverse_link"], done["action"]) == (
        "ACTIVE",
        topic,
        BACK,
        "rebuild",
    ), done
    saved = done["saved_topic"]
    assert saved and sum(p["saved_records"] for p in done["partitions"]) == 10
    assert sorted(r.value for p in range(PARTITIONS) for r in read_partition(west, saved, p)) == sorted(
        r.value for recs in tail.values() for r in recs
    )
    catch_up(config, BACK, spark, topic)
    assert_identical(read_topic(east, topic, PARTITIONS), read_topic(west, topic, PARTITIONS))
    assert sum(len(r) for r in read_topic(west, topic, PARTITIONS).values()) == 230
    assert engine.describe_mirror(config, BACK, topic).read_only.startswith("enforced by the broker")

    # Planned the other way, then us-east follows us-west again, in place (no record copied twice).
    assert engine.promote(config, BACK, spark, [topic], timeout_s=120).mirrors[topic]["after"] == "STOPPED"
    assert produce(west, topic, 20, start=400) == []
    again = engine.reverse(config, BACK, [topic]).mirrors[topic]
    assert (again["after"], again["reverse_link"], again["action"]) == ("ACTIVE", LINK, "continue"), again
    catch_up(config, LINK, spark, topic)
    assert_identical(read_topic(west, topic, PARTITIONS), read_topic(east, topic, PARTITIONS))
    assert sum(len(r) for r in read_topic(east, topic, PARTITIONS).values()) == 250
    assert engine.verify_mirrors(config, LINK, spark, [topic]).identical
