"""Secured local clusters (`local up --security MODE`), on real brokers.

The sasl_ssl pair is the session's `secure_kafka` (ports 12592/22592). The
ssl and sasl_plaintext modes each get a one-cluster root of their own on the
first free port pair from 13592, started and stopped inside their test.

Every test that sees a password checks it never shows where it must not:
CLI output, broker logs, the format tool's output.
"""

from __future__ import annotations

import json
import os
import stat
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_pipeline.cli import cli
from mirror_pipeline.local.clusters import LocalKafka
from mirror_pipeline.local.security import read_credentials
from mirror_pipeline.model.errors import LocalClusterError
from tests.ports import free_port_pair

pytestmark = pytest.mark.integration

OWN_PORTS = (13592, 13692)


def _name(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def _passwords(kafka: LocalKafka) -> list[str]:
    creds = read_credentials(kafka.root, kafka.security)
    assert creds is not None
    return creds.secret_values


def _create_topic(settings: dict[str, str], topic: str) -> None:
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        found = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and all(p.leader >= 0 for p in found.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {topic} not ready after 30 s"
        time.sleep(0.1)


def _produce(settings: dict[str, str], topic: str, value: bytes) -> KafkaError | None:
    """Produce one record; the delivery error, or None when it was written."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**settings, "message.timeout.ms": 10000, "log_level": 0})
    producer.produce(topic, key=b"k", value=value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert outcome, "no delivery report within 20 s"
    return outcome[0]


def _consume_one(settings: dict[str, str], topic: str) -> Any:
    consumer = Consumer({**settings, "group.id": _name("group"), "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                return msg
    finally:
        consumer.close()
    raise AssertionError(f"nothing consumed from {topic} within 30 s")


def _client_errors(settings: dict[str, str], wait: float = 15.0) -> tuple[bool, list[KafkaError]]:
    """(whether a metadata request succeeded, the errors the client reported) for `settings`."""
    errors: list[KafkaError] = []
    admin = AdminClient({**settings, "log_level": 0, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=wait)
        answered = True
    except KafkaException:
        answered = False
    admin.poll(1)  # error callbacks run only when the client is polled
    return answered, errors


def _round_trip(kafka: LocalKafka, cluster: int | str = 0) -> None:
    settings = kafka.client_properties("admin", cluster)
    topic = _name("secured")
    _create_topic(settings, topic)
    assert _produce(settings, topic, b"hello " + topic.encode()) is None
    record = _consume_one(settings, topic)
    assert (record.key(), record.value()) == (b"k", b"hello " + topic.encode())


def _user_without_acl_is_refused(kafka: LocalKafka) -> None:
    admin = kafka.client_properties()
    topic = _name("guarded")
    _create_topic(admin, topic)
    user = _name("no-acl")
    kafka.create_user(user)
    kafka.create_user(user)  # idempotent: same secret, no error
    error = _produce(kafka.client_properties(user), topic, b"refused")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error


def _secrets_stay_in_their_files(kafka: LocalKafka) -> None:
    passwords = _passwords(kafka)
    for cluster in kafka.names:
        for log in ("server.log", "console.log", ".formatted"):
            text = (kafka.root / cluster / log).read_text(errors="replace")
            leaked = [p for p in passwords if p in text]
            assert not leaked, f"a password is in {cluster}/{log}"
        assert stat.S_IMODE((kafka.root / cluster / "server.properties").stat().st_mode) == 0o600
        assert not (kafka.root / cluster / ".format.args").exists()
    private = [kafka.root / "credentials.json"] + [
        p for p in (kafka.root / "tls").glob("*.pem") if p.name.endswith("-key.pem") or p.name == "broker.pem"
    ]
    for path in private:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


# -- sasl_ssl: the session pair -------------------------------------------------------------------


@pytest.mark.parametrize("cluster", ["us-west", "us-east"])
def test_sasl_ssl_admin_creates_produces_and_consumes(secure_kafka: LocalKafka, cluster: str) -> None:
    settings = secure_kafka.client_properties("admin", cluster)
    assert settings["security.protocol"] == "SASL_SSL"
    assert settings["sasl.mechanism"] == "SCRAM-SHA-512" and settings["sasl.username"] == "admin"
    assert Path(settings["ssl.ca.location"]).is_file()
    _round_trip(secure_kafka, cluster)


def test_sasl_ssl_user_without_acls_is_refused(secure_kafka: LocalKafka) -> None:
    _user_without_acl_is_refused(secure_kafka)


def test_sasl_ssl_created_user_exists_on_every_cluster(secure_kafka: LocalKafka) -> None:
    user = _name("link")
    secure_kafka.create_user(user)
    for cluster in secure_kafka.names:
        # Authenticated (else no metadata at all), though it may see no topic without ACLs.
        answered, errors = _client_errors(secure_kafka.client_properties(user, cluster))
        assert answered, [e.name() for e in errors]


def test_sasl_ssl_wrong_password_is_refused(secure_kafka: LocalKafka) -> None:
    settings = {**secure_kafka.client_properties(), "sasl.password": "not-the-password"}
    answered, errors = _client_errors(settings, wait=5)
    assert not answered
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), [e.str() for e in errors[:5]]


def test_sasl_ssl_client_without_the_ca_fails_the_handshake(secure_kafka: LocalKafka) -> None:
    settings = secure_kafka.client_properties()
    del settings["ssl.ca.location"]  # falls back to the system's CAs, which never signed the local one
    answered, errors = _client_errors(settings, wait=5)
    assert not answered
    assert any(e.code() == KafkaError._SSL or "certificate verify failed" in e.str() for e in errors), [
        e.str() for e in errors[:5]
    ]


def test_sasl_ssl_unknown_user_is_refused_without_secrets(secure_kafka: LocalKafka) -> None:
    with pytest.raises(LocalClusterError, match="no local user 'nobody'") as caught:
        secure_kafka.client_properties("nobody")
    creds = read_credentials(secure_kafka.root, secure_kafka.security)
    assert not any(p in str(caught.value) or p in repr(creds) for p in _passwords(secure_kafka))


def test_sasl_ssl_secrets_stay_in_their_files(secure_kafka: LocalKafka) -> None:
    _secrets_stay_in_their_files(secure_kafka)


def test_sasl_ssl_mode_of_a_formatted_root_cannot_change(secure_kafka: LocalKafka) -> None:
    other = LocalKafka(secure_kafka.root, secure_kafka.count, secure_kafka.base_port, security="plaintext")
    with pytest.raises(LocalClusterError, match="--security sasl_ssl"):
        other.up()
    assert all(info.running for info in secure_kafka.status())


def test_cli_up_shows_references_and_writes_the_env_file(secure_kafka: LocalKafka) -> None:
    passwords = _passwords(secure_kafka)
    args = ["local", "up", "--dir", str(secure_kafka.root), "--security", "sasl_ssl"]
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    as_text = CliRunner().invoke(cli, args)
    for result in (as_json, as_text):
        assert result.exit_code == 0, result.output
        assert not any(p in result.output for p in passwords), "a password reached the terminal"

    reported = json.loads(as_json.stdout)
    assert [c["name"] for c in reported] == ["us-west", "us-east"]
    env_file = Path(reported[0]["env_file"])
    for cluster, var in zip(reported, ["US_WEST_ADMIN_PASSWORD", "US_EAST_ADMIN_PASSWORD"], strict=True):
        assert cluster["security"] == "sasl_ssl" and cluster["running"]
        assert cluster["client"]["sasl.password"] == f"${{{var}}}"
        assert cluster["env_file"] == str(env_file)
        assert f"sasl.password: ${{{var}}}" in as_text.stdout
    assert str(env_file) in as_text.stdout

    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in env_file.read_text().splitlines()
        if line.startswith("export ")
    )
    admin = secure_kafka.client_properties()["sasl.password"]
    assert exported == {"US_WEST_ADMIN_PASSWORD": admin, "US_EAST_ADMIN_PASSWORD": admin}

    status = CliRunner().invoke(cli, ["local", "status", "--dir", str(secure_kafka.root)])
    assert status.exit_code == 0 and status.stdout.count("sasl_ssl") == 2, status.output


# -- ssl and sasl_plaintext: one cluster each, on a root of their own ---------------------------------


@pytest.mark.parametrize("mode", ["ssl", "sasl_plaintext"])
def test_other_secured_modes(mode: str, tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path / mode, count=1, base_port=free_port_pair(*OWN_PORTS), security=mode)
    try:
        kafka.up()
        admin = kafka.client_properties()
        assert admin["security.protocol"] == mode.upper()
        _round_trip(kafka)
        _user_without_acl_is_refused(kafka)
        if mode == "ssl":
            assert "sasl.password" not in admin
            assert Path(admin["ssl.certificate.location"]).is_file() and Path(admin["ssl.key.location"]).is_file()
            # Mutual TLS: a client that trusts the CA but shows no certificate is turned away.
            anonymous = {k: v for k, v in admin.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
            answered, _ = _client_errors(anonymous, wait=5)
            assert not answered
        else:
            answered, errors = _client_errors({**admin, "sasl.password": "wrong"}, wait=5)
            assert not answered and any(e.code() == KafkaError._AUTHENTICATION for e in errors)
            _secrets_stay_in_their_files(kafka)

        # A restart reuses the credentials: the same admin settings still work.
        kafka.down()
        again = LocalKafka.from_root(kafka.root)
        assert again.security == mode
        again.up()
        assert again.client_properties() == admin
        _round_trip(again)
    finally:
        kafka.down()
    assert not any(os.path.exists(kafka.root / c / "broker.pid") for c in kafka.names)
