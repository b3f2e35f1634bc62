"""How a client's librdkafka settings are layered (`client_settings.client_config`)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka.client_settings import CONSUMER_ROLES, ROLE_SETTINGS, client_config

CLUSTER = {"bootstrap.servers": "127.0.0.1:1"}


def test_consumers_fetch_again_soon_after_their_queue_drains():
    for role in CONSUMER_ROLES:
        assert client_config(CLUSTER, "l", role)["fetch.queue.backoff.ms"] == 10
    for role in set(ROLE_SETTINGS) - set(CONSUMER_ROLES):
        # A consumer property on a producer or admin client only earns a librdkafka warning.
        assert "fetch.queue.backoff.ms" not in client_config(CLUSTER, "l", role)


def test_every_client_paces_its_first_connections_briefly():
    assert {client_config(CLUSTER, "l", role)["reconnect.backoff.ms"] for role in ROLE_SETTINGS} == {10}


def test_the_cluster_properties_change_the_speed_defaults_but_not_the_role_settings():
    cluster = {
        **CLUSTER,
        "reconnect.backoff.ms": "250",
        "fetch.queue.backoff.ms": "500",
        "isolation.level": "read_uncommitted",
        "acks": "1",
    }
    reader = client_config(cluster, "l", "reader")
    assert (reader["reconnect.backoff.ms"], reader["fetch.queue.backoff.ms"]) == ("250", "500")
    assert reader["isolation.level"] == "read_committed"
    assert client_config(cluster, "l", "writer")["acks"] == "all"
    assert client_config(cluster, "l", "reader", **{"fetch.queue.backoff.ms": 1})["fetch.queue.backoff.ms"] == 1


@pytest.mark.parametrize("role", sorted(ROLE_SETTINGS))
def test_librdkafka_takes_every_role_setting(role):
    """Building the client checks every name and value (no broker is contacted before a request)."""
    conf = {**client_config(CLUSTER, "l", role), "log_level": 0}
    if role == "admin":
        AdminClient(conf)
    elif role in CONSUMER_ROLES:
        Consumer(conf).close()
    else:
        Producer(conf).flush(0)
