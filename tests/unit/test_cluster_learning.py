"""A new client's first metadata requests (`clients.learn_cluster`), which spare it librdkafka's retry timers."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ClusterMetadata

from mirror_pipeline.kafka import clients as kc


class RecordingClient:
    """Stands in for a client's `list_topics` only: what is asked, and whether it fails."""

    def __init__(self, fails: bool = False):
        self.asked: list[str | None] = []
        self.fails = fails

    def list_topics(self, topic=None, timeout=-1):
        self.asked.append(topic)
        if self.fails:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return ClusterMetadata()


def test_a_cluster_that_does_not_answer_is_left_to_the_request_that_follows():
    client = RecordingClient(fails=True)
    kc.learn_cluster(client, "orders")  # does not raise
    assert client.asked == ["orders"]


def test_a_second_request_follows_the_first_so_a_learned_broker_is_connected():
    client = RecordingClient()
    kc.learn_cluster(client, "orders")
    assert client.asked == ["orders", "orders"]
