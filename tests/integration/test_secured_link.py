"""A link between SASL_SSL clusters with an authorizer, run with the least privilege docs/security.md lists
(R-ACL-2, R-ACL-3, R-REL-3).

Each principal gets exactly the ACLs of `mirror-pipeline link acls` and nothing
more; the link then creates a mirror, copies through Spark, syncs configs and
consumer offsets, pauses, resumes and promotes. The source principal holds
read rights only, so nothing the pipeline sends to the source needs more.
A foreign principal allowed to write to every topic is refused by the broker
on the mirror until the promote, and allowed after it. Wrong passwords, an
untrusted CA and missing ACLs each give one clear error naming the cluster,
never a traceback, never the secret.
"""

from __future__ import annotations

import time
import uuid

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import acls
from mirror_pipeline.local.certificates import ensure_ca
from mirror_pipeline.model.errors import MirrorError
from tests.kafka_records import assert_identical, committed, read_topic
from tests.secured_link import LINK, PARTITIONS, grant, produce, settings, write_config


def test_least_privilege_link_copies_syncs_and_promotes_and_the_source_is_only_read(
    secure_kafka, spark, principals, secured_link
):
    config, topic, group = secured_link["config"], secured_link["topic"], secured_link["group"]
    app = f"User:{principals['app']}"
    # The application may write to every topic of the destination, as many are set up.
    grant(
        secured_link["east"],
        "us-east",
        [
            AclBinding(
                ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, app, "*", operation, AclPermissionType.ALLOW
            )
            for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ],
    )

    engine.create_mirror(config, LINK, topic)
    described = engine.describe_mirror(config, LINK, topic)
    assert described.read_only.startswith("enforced by the broker"), described.read_only
    assert app in described.read_only

    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).records == 200
    west, east = settings(secure_kafka, "admin", 0), settings(secure_kafka, "admin", 1)
    assert_identical(read_topic(west, topic, PARTITIONS), read_topic(east, topic, PARTITIONS))
    alter = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)],
    )
    for future in secured_link["west"].incremental_alter_configs([alter]).values():
        future.result(30)
    assert engine.sync_configs(config, LINK).mirrors[topic].changed["retention.ms"][1] == "7200000"
    engine.sync_offsets(config, LINK)
    assert committed(east, group, topic, PARTITIONS) == {0: 60, 1: 40}

    # A foreign write into the mirror is refused by the broker, not merely detected afterwards.
    app_props = settings(secure_kafka, principals["app"], 1)
    refused = produce(app_props, topic, 5, start=1000)
    assert refused and {e.code() for e in refused} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}

    assert engine.pause(config, LINK, [topic]).mirrors[topic]["after"] == "PAUSED"
    assert engine.resume(config, LINK, [topic]).mirrors[topic]["after"] == "ACTIVE"
    assert produce(west, topic, 50, start=200) == []
    promoted = engine.promote(config, LINK, spark, [topic], timeout_s=120)
    assert promoted.mirrors[topic]["after"] == "STOPPED"
    assert_identical(read_topic(west, topic, PARTITIONS), read_topic(east, topic, PARTITIONS))
    assert engine.describe_mirror(config, LINK, topic).read_only.startswith("lifted")
    # verify reads both clusters with the same least privilege (R-REL-4)
    assert engine.verify_mirrors(config, LINK, spark, [topic]).identical
    assert produce(app_props, topic, 5, start=2000) == []  # a normal topic again: the application writes

    # The source principal holds read rights only: nothing the link did needed more.
    src = f"User:{principals['src']}"
    held = acls.describe_bindings(
        secured_link["west"],
        "us-west",
        AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, src, None, AclOperation.ANY, AclPermissionType.ANY
        ),
    )
    assert held and {b.operation for b in held} <= {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.DESCRIBE_CONFIGS,
    }


def run_cli(*args: str, env: dict) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.output


def one_error_line(code: int, output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 1, output
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert "Traceback" not in output
    return lines[0]


def test_wrong_password_is_one_clear_error_without_the_secret(secured_link):
    env = dict(secured_link["env"])
    var = next(v for v in env if v.startswith("US_EAST_PASSWORD"))
    real = env[var]
    env[var] = "not-the-password-" + uuid.uuid4().hex
    code, output = run_cli("mirror", "list", "--link", LINK, "--config", str(secured_link["path"]), env=env)
    line = one_error_line(code, output)
    assert "cluster 'us-east'" in line and "authentication failed" in line and "sasl.password" in line
    assert env[var] not in output and real not in output


def test_untrusted_ca_is_one_clear_error(secure_kafka, principals, secured_link, tmp_path):
    (tmp_path / "other-ca").mkdir()
    other_ca = ensure_ca(tmp_path / "other-ca")
    env: dict[str, str] = {}
    path = write_config(
        tmp_path / "other.yaml",
        secure_kafka,
        principals["src"],
        principals["dst"],
        uuid.uuid4().hex[:8],
        secured_link["group"],
        env,
        overrides={"us-east": {"ssl.ca.location": str(other_ca.certificate)}},
    )
    code, output = run_cli("mirror", "list", "--link", LINK, "--config", str(path), env=env)
    line = one_error_line(code, output)
    assert "cluster 'us-east'" in line and "TLS handshake failed" in line and "ssl.ca.location" in line
    assert not any(secret in output for secret in env.values())


def test_missing_acls_name_the_cluster_and_the_right(secure_kafka, principals, secured_link, tmp_path):
    # A source principal without any ACL: the topic cannot even be described.
    stranger = f"stranger-{uuid.uuid4().hex[:8]}"
    secure_kafka.create_user(stranger)
    env: dict[str, str] = {}
    path = write_config(
        tmp_path / "stranger.yaml",
        secure_kafka,
        stranger,
        principals["dst"],
        secured_link["tag"],
        secured_link["group"],
        env,
    )
    code, output = run_cli(
        "mirror", "create", secured_link["topic"], "--link", LINK, "--config", str(path), env={**env}
    )
    line = one_error_line(code, output)
    assert "cluster 'us-west'" in line and "DESCRIBE" in line and secured_link["topic"] in line, line
    assert not any(secret in output for secret in env.values())

    # The link's destination principal without ALTER on the cluster cannot deny another writer:
    # the mirror is still created and copied, and describe says why it is not enforced.
    config = load_config(secured_link["path"], env={**secured_link["env"]})
    dst, app = f"User:{principals['dst']}", f"User:{principals['app']}"
    grant(
        secured_link["east"],
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
    alter = AclBinding(
        ResourceType.BROKER,
        "kafka-cluster",
        ResourcePatternType.LITERAL,
        dst,
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    assert acls.delete_bindings(secured_link["east"], "us-east", [alter])
    time.sleep(1)
    engine.create_mirror(config, LINK, secured_link["topic"])
    said = engine.describe_mirror(config, LINK, secured_link["topic"]).read_only
    assert said.startswith("not enforced") and "ALTER on the cluster" in said, said


def test_a_missing_read_right_fails_the_cycle_naming_it(spark, principals, secured_link):
    config, topic = secured_link["config"], secured_link["topic"]
    engine.create_mirror(config, LINK, topic)
    read = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        f"User:{principals['src']}",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    acls.delete_bindings(secured_link["west"], "us-west", [read])
    time.sleep(1)
    with pytest.raises(MirrorError) as failed:
        engine.run_cycle(config, LINK, spark, mirrors=[topic])
    said = str(failed.value)
    assert "TOPIC_AUTHORIZATION_FAILED" in said and "needs READ on the topic" in said and topic in said, said
