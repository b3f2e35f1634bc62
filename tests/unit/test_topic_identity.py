"""`topic_identity` asks again when librdkafka retires the broker handle under the request, within its timeout."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_pipeline.link import topic_reading
from mirror_pipeline.link.topic_reading import topic_identity
from mirror_pipeline.model.errors import ClusterUnreachable

TOPIC_ID = "Hn1uOSV3SyCbbi7_ZU1mYA"


class _Admin:
    """Answers each describe with the next of `answers`: a KafkaError code (a failure) or a topic id."""

    def __init__(self, answers: list) -> None:
        self.answers = answers
        self.timeouts: list[float] = []

    def describe_topics(self, topics, request_timeout: float):
        self.timeouts.append(request_timeout)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        done: Future = Future()
        if isinstance(answer, int):
            done.set_exception(KafkaException(KafkaError(answer)))
        else:
            done.set_result(SimpleNamespace(topic_id=answer))
        return {topics.topic_names[0]: done}


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(topic_reading, "ASK_AGAIN_S", 0.01)


def test_a_retired_broker_handle_is_asked_again():
    admin = _Admin([KafkaError._DESTROY_BROKER, KafkaError._DESTROY_BROKER, TOPIC_ID])
    assert topic_identity(admin, "orders", "us-east", timeout=5.0) == TOPIC_ID
    assert len(admin.timeouts) == 3


def test_the_tries_share_the_timeout():
    admin = _Admin([KafkaError._DESTROY_BROKER])
    with pytest.raises(ClusterUnreachable, match="cluster 'us-east': describing topic 'orders' failed"):
        topic_identity(admin, "orders", "us-east", timeout=1.0)
    assert admin.timeouts[0] == pytest.approx(1.0, abs=0.05)
    assert all(t <= 1.0 for t in admin.timeouts)
    assert min(admin.timeouts) >= topic_reading.MIN_ASK_S


def test_a_cluster_that_refuses_is_told_at_once():
    admin = _Admin([KafkaError._TRANSPORT])
    with pytest.raises(ClusterUnreachable):
        topic_identity(admin, "orders", "us-east", timeout=5.0)
    assert len(admin.timeouts) == 1


def test_a_missing_topic_has_no_identity():
    assert topic_identity(_Admin([KafkaError.UNKNOWN_TOPIC_OR_PART]), "orders", "us-east") is None
