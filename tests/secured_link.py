"""A link between the secured test clusters (`secure_kafka`), run with exactly the least privilege it needs.

Fixtures `principals` and `secured_link`, and the helpers the secured tests share.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AclBinding, AdminClient, NewTopic

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import acls
from mirror_pipeline.link.required_acls import bindings, grants_from_dicts
from tests.config_files import TEST_FENCE_WAIT_MS
from tests.kafka_records import commit

LINK = "secured"
PARTITIONS = 2


@pytest.fixture
def principals(secure_kafka):
    """Three fresh users: the link's source and destination principals, and a foreign application."""
    tag = uuid.uuid4().hex[:8]
    names = {"src": f"src-{tag}", "dst": f"dst-{tag}", "app": f"app-{tag}"}
    for name in names.values():
        secure_kafka.create_user(name)
    return names


def settings(secure_kafka, user: str, cluster: int) -> dict:
    return secure_kafka.client_properties(user, cluster)


def write_config(
    path: Path, secure_kafka, src: str, dst: str, tag: str, group: str, env: dict, overrides: dict | None = None
) -> Path:
    """The link's config: passwords as ${VAR} references, as an operator writes them."""
    clusters = {}
    for alias, user, index in (("us-west", src, 0), ("us-east", dst, 1)):
        props = settings(secure_kafka, user, index)
        var = f"{alias.upper().replace('-', '_')}_PASSWORD_{tag}"
        env[var] = props.pop("sasl.password")
        clusters[alias] = {**props, "sasl.password": "${" + var + "}", **(overrides or {}).get(alias, {})}
    data = {
        "clusters": clusters,
        "defaults": {"mirror.writer.fence.wait.ms": TEST_FENCE_WAIT_MS},
        "links": {
            LINK: {
                "source": "us-west",
                "destination": "us-east",
                "consumer.offset.sync.enable": True,
                "consumer.offset.group.filters": {"groupFilters": [{"name": group, "patternType": "LITERAL"}]},
                **{
                    f"mirror.{kind}.topic": f"_{tag}.{kind.replace('.', '-')}"
                    for kind in ("state", "offset.map", "checkpoints")
                },
            }
        },
        "spark": {"master": "local[2]"},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def grant(admin: AdminClient, alias: str, made: list[AclBinding]) -> None:
    acls.create_bindings(admin, alias, made)
    wanted = {acls.binding_key(b) for b in made}
    deadline = time.monotonic() + 30  # the authorizer sees new bindings once the metadata log has them
    while not wanted <= {acls.binding_key(b) for b in acls.describe_bindings(admin, alias)}:
        assert time.monotonic() < deadline, "ACLs not visible after 30 s"
        time.sleep(0.2)


def produce(props: dict, topic: str, count: int, start: int = 0) -> list[KafkaError]:
    """Produce and return the delivery errors (empty: all landed)."""
    errors: list[KafkaError] = []
    producer = Producer({**props, "linger.ms": 5, "message.timeout.ms": 15000})
    for i in range(start, start + count):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % PARTITIONS,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    producer.flush(30)
    return errors


@pytest.fixture
def secured_link(secure_kafka, principals, tmp_path, monkeypatch):
    """A source topic with records and a committed group, a config, and the link's least-privilege ACLs."""
    tag = uuid.uuid4().hex[:8]
    topic, group = f"orders-{tag}", f"billing-{tag}"
    west_admin = AdminClient(settings(secure_kafka, "admin", 0))
    east_admin = AdminClient(settings(secure_kafka, "admin", 1))
    west_admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    assert produce(settings(secure_kafka, "admin", 0), topic, 200) == []
    commit(settings(secure_kafka, "admin", 0), group, topic, {0: 60, 1: 40})

    env: dict[str, str] = {}
    path = write_config(tmp_path / "mirror.yaml", secure_kafka, principals["src"], principals["dst"], tag, group, env)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    config = load_config(path)
    needed = engine.required_acls(config, LINK, [topic], [group])
    grant(west_admin, "us-west", bindings(grants_from_dicts(needed["source"]), f"User:{principals['src']}"))
    grant(east_admin, "us-east", bindings(grants_from_dicts(needed["destination"]), f"User:{principals['dst']}"))
    return {
        "config": config,
        "path": path,
        "topic": topic,
        "group": group,
        "west": west_admin,
        "east": east_admin,
        "env": env,
        "tag": tag,
    }
