"""One leader look-up at a time per client (`kafka.leader_lookups`): librdkafka's look-up races with itself."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import ClusterMetadata, PartitionMetadata, TopicMetadata

from mirror_pipeline.kafka import leader_lookups
from mirror_pipeline.kafka.clients import list_offsets
from mirror_pipeline.model.errors import ClusterUnreachable


class SlowBroker:
    """An admin client whose ListOffsets answers come 20 ms later, from another thread.

    It records how many requests were unanswered when each one was sent: librdkafka
    crashes when a request looks leaders up while another one's look-up is in flight.
    """

    def __init__(self, fail_topics: frozenset[str] = frozenset()):
        self.unanswered = 0
        self.in_flight_at_send: list[int] = []
        self.fail_topics = fail_topics
        self._lock = threading.Lock()

    def list_offsets(self, wanted, isolation_level=None, request_timeout=None):
        with self._lock:
            self.in_flight_at_send.append(self.unanswered)
            self.unanswered += len(wanted)
        futures = {tp: Future() for tp in wanted}
        threading.Timer(0.02, self._answer, [futures]).start()
        return futures

    def _answer(self, futures):
        for tp, future in futures.items():
            with self._lock:
                self.unanswered -= 1
            if tp.topic in self.fail_topics:
                future.set_exception(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
            else:
                future.set_result(SimpleNamespace(offset=7))


def metadata(**topics: list[int]) -> ClusterMetadata:
    """Metadata naming each topic's partitions' leaders (-1: none)."""
    md = ClusterMetadata()
    for name, leaders in topics.items():
        topic = TopicMetadata()
        topic.topic = name
        for i, leader in enumerate(leaders):
            part = PartitionMetadata()
            part.id, part.leader = i, leader
            topic.partitions[i] = part
        md.topics[name] = topic
    return md


WIDE = [(f"t{i}", p) for i in range(20) for p in range(50)]  # 1,000 partitions: two requests of 500


def test_partitions_whose_leaders_the_client_may_not_hold_are_asked_one_request_at_a_time():
    admin = SlowBroker()
    assert list_offsets(admin, WIDE, "latest", "b") == dict.fromkeys(WIDE, 7)
    assert admin.in_flight_at_send == [0, 0]


def test_partitions_whose_leaders_the_client_holds_are_asked_side_by_side():
    admin = SlowBroker()
    leader_lookups.learned(admin, metadata(**{f"t{i}": [1] * 50 for i in range(20)}))
    assert list_offsets(admin, WIDE, "latest", "b") == dict.fromkeys(WIDE, 7)
    assert admin.in_flight_at_send == [0, 500]


def test_an_answered_request_makes_its_partitions_held():
    admin = SlowBroker()
    list_offsets(admin, WIDE, "latest", "b")
    list_offsets(admin, WIDE, "latest", "b")
    assert admin.in_flight_at_send == [0, 0, 0, 500]


def test_threads_sharing_a_client_never_look_leaders_up_side_by_side():
    admin = SlowBroker()
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda topic: list_offsets(admin, [(topic, 0)], "latest", "b"), ["a", "b", "c", "d"]))
    assert answers == [{(t, 0): 7} for t in "abcd"]
    assert admin.in_flight_at_send == [0, 0, 0, 0]


def test_a_topic_with_a_partition_without_a_leader_is_not_held():
    admin = SlowBroker()
    leader_lookups.learned(admin, metadata(whole=[1, 2], split=[1, -1]))
    assert leader_lookups.all_held(admin, [("whole", 0), ("whole", 1)])
    assert not leader_lookups.all_held(admin, [("split", 0)])


def test_a_partition_past_those_noted_is_not_held():
    admin = SlowBroker()
    leader_lookups.learned(admin, metadata(grown=[1, 2]))
    assert not leader_lookups.all_held(admin, [("grown", 2)])


def test_what_was_noted_ages_out(monkeypatch: pytest.MonkeyPatch):
    admin = SlowBroker()
    leader_lookups.learned(admin, metadata(old=[1]))
    monkeypatch.setattr(leader_lookups, "LEADERS_FRESH_S", -1.0)
    assert not leader_lookups.all_held(admin, [("old", 0)])


def test_a_failed_answer_forgets_its_topic_and_the_retry_goes_one_request_at_a_time():
    admin = SlowBroker(fail_topics=frozenset({"moving"}))
    leader_lookups.learned(admin, metadata(moving=[1] * 600))
    wanted = [("moving", p) for p in range(600)]
    # Long enough for a retry after the first attempt and its 0.2 s pause on a loaded machine (0.3 s was not).
    with pytest.raises(ClusterUnreachable, match="NOT_LEADER_FOR_PARTITION"):
        list_offsets(admin, wanted, "latest", "b", timeout=1.5)
    assert admin.in_flight_at_send[:2] == [0, 500]  # side by side while held
    assert len(admin.in_flight_at_send) > 2, "retried before the deadline"
    assert set(admin.in_flight_at_send[2:]) == {0}  # then one at a time


def test_clients_keep_separate_books():
    one, other = SlowBroker(), SlowBroker()
    leader_lookups.learned(one, metadata(t=[1]))
    assert leader_lookups.all_held(one, [("t", 0)])
    assert not leader_lookups.all_held(other, [("t", 0)])


def test_a_consumer_learning_its_cluster_notes_nothing_and_is_never_held():
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    try:
        leader_lookups.learned(consumer, metadata(t=[1]))
        leader_lookups.answered(consumer, [("t", 0)])
        assert not leader_lookups.all_held(consumer, [("t", 0)])
        with leader_lookups.one_at_a_time(consumer):
            pass
    finally:
        consumer.close()
