"""Kafka's errors turned into the project's, in one place, never quoting client settings."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ClusterMetadata

from mirror_pipeline.kafka.client_logs import DropFencedLogs
from mirror_pipeline.kafka.clients import error_reason, kafka_errors, list_offsets
from mirror_pipeline.kafka.handshake import DropConnectionFailureLogs
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError


def raised(code: int, text: str) -> KafkaException:
    return KafkaException(KafkaError(code, text))


def test_a_brokers_error_keeps_its_explanation():
    exc = raised(KafkaError.INVALID_CONFIG, "Invalid value abc for configuration retention.ms")
    assert error_reason(exc) == "INVALID_CONFIG: Invalid value abc for configuration retention.ms"


def test_a_local_error_shows_only_its_name_since_its_text_may_quote_settings():
    exc = raised(KafkaError._INVALID_ARG, "sasl.password=hunter2 is not valid")
    assert error_reason(exc) == "_INVALID_ARG"


def test_kafka_errors_raises_the_projects_error_naming_who_failed():
    with pytest.raises(
        ClusterUnreachable,
        match=(
            r"^cluster 'west' did not answer: no connection to its brokers "
            r"\(refused, closed or unreachable\) \(_TRANSPORT\)$"
        ),
    ):
        with kafka_errors("cluster 'west' did not answer", ClusterUnreachable):
            raise raised(KafkaError._TRANSPORT, "broker down at sasl.password=hunter2")


def test_kafka_errors_can_let_an_expected_error_pass():
    with kafka_errors("deleting", MirrorError, ignore={KafkaError.UNKNOWN_TOPIC_OR_PART}):
        raise raised(KafkaError.UNKNOWN_TOPIC_OR_PART, "gone")


def test_connection_failure_lines_stay_out_of_the_output_and_other_lines_pass():
    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("mirror_pipeline.librdkafka", logging.ERROR, __file__, 1, message, None, None)

    keep = DropConnectionFailureLogs().filter
    assert not keep(
        record(
            "FAIL [mirror-pipeline.l.admin#producer-5] [thrd:127.0.0.1:1/bootstrap]: "
            "Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"
        )
    )
    assert not keep(record("ERROR [c] [thrd:main]: SASL authentication error: Authentication failed"))
    assert keep(record("ERROR [c] [thrd:main]: Topic _mirror-pipeline.state partition count changed"))


def test_lines_about_a_fenced_writer_are_left_out_since_fencing_is_how_writers_are_handed_over():
    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("mirror_pipeline.librdkafka", logging.ERROR, __file__, 1, message, None, None)

    keep = DropFencedLogs().filter
    assert not keep(
        record(
            "FATAL [mirror-pipeline.l.state-writer#producer-6] [thrd:main]: Fatal error: Local: This instance "
            "has been fenced by a newer instance: Failed to add partitions to transaction"
        )
    )
    assert not keep(
        record(
            'ADDPARTS [p] [thrd:main]: TxnCoordinator/1: Failed to add partition "o" [0] to transaction: '
            "Broker: Producer attempted an operation with an old epoch"
        )
    )
    assert keep(
        record("TXNERR [p] [thrd:main]: Fatal transaction error: Broker: Transactional Id authorization failed")
    )


class LeaderlessUntilAsked:
    """An admin client whose cached metadata names no leader for a new topic until asked for it (`_NOENT`)."""

    def __init__(self):
        self.asked: list[str] = []

    def list_topics(self, topic=None, timeout=None):
        self.asked.append(topic)
        return ClusterMetadata()

    def list_offsets(self, wanted, isolation_level=None, request_timeout=None):
        futures = {}
        for tp in wanted:
            future = Future()
            if tp.topic in self.asked:
                future.set_result(SimpleNamespace(offset=7))
            else:
                future.set_exception(raised(KafkaError._NOENT, "Local: No such entry"))
            futures[tp] = future
        return futures


def test_listing_the_offsets_of_a_topic_without_known_leaders_asks_for_its_leaders_and_retries():
    admin = LeaderlessUntilAsked()
    assert list_offsets(admin, [("new", 0), ("new", 1)], "latest", "b", timeout=5) == {("new", 0): 7, ("new", 1): 7}
    assert admin.asked == ["new"]


class NeverLeading:
    """An admin client whose broker answers every ListOffsets with NOT_LEADER_FOR_PARTITION."""

    def list_topics(self, topic=None, timeout=None):
        return ClusterMetadata()

    def list_offsets(self, wanted, isolation_level=None, request_timeout=None):
        futures = {}
        for tp in wanted:
            future = Future()
            future.set_exception(raised(KafkaError.NOT_LEADER_FOR_PARTITION, "Broker: Not leader for partition"))
            futures[tp] = future
        return futures


def test_partitions_still_without_a_leader_at_the_deadline_say_to_try_again():
    with pytest.raises(
        ClusterUnreachable,
        match=(
            r"^cluster 'b': listing offsets of 'wide' failed: NOT_LEADER_FOR_PARTITION "
            r"\(no leader answered within 0s; .* try again shortly\)$"
        ),
    ):
        list_offsets(NeverLeading(), [("wide", 0)], "latest", "b", timeout=0.3)
