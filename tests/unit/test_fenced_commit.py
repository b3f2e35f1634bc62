"""A writer fenced while its commit was in flight is told so, whatever error the commit raised
(`TransactionalWriter._fenced_meanwhile`): a pause or stop that wins that race is not a failure."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_pipeline.link.state_writers import TransactionalWriter
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError


class CommitFails:
    """Stands in for a transactional producer whose commit raises `commit_error`; its abort raises
    `abort_error` (librdkafka raises a fenced producer's fatal error there) or succeeds."""

    def __init__(self, commit_error: int, abort_error: int | None):
        self.commit_error, self.abort_error = commit_error, abort_error
        self.aborts = 0

    def begin_transaction(self):
        pass

    def produce(self, *args, **kwargs):
        pass

    def commit_transaction(self, timeout):
        raise KafkaException(KafkaError(self.commit_error))

    def abort_transaction(self, timeout):
        self.aborts += 1
        if self.abort_error is not None:
            raise KafkaException(KafkaError(self.abort_error, fatal=True))


def writer_over(producer) -> TransactionalWriter:
    writer = object.__new__(TransactionalWriter)
    writer.topic, writer.where, writer._producer = "state", "link 'l' writer slot 3", producer
    return writer


def test_a_commit_that_failed_for_another_reason_after_a_fence_is_a_concurrent_writer():
    producer = CommitFails(KafkaError.UNKNOWN, abort_error=KafkaError._FENCED)
    with pytest.raises(ConcurrentWriter, match="another writer took over"):
        writer_over(producer).write([("k", b"v")])
    assert producer.aborts == 1


def test_a_commit_that_failed_unfenced_is_a_failure_and_its_transaction_is_aborted():
    producer = CommitFails(KafkaError.UNKNOWN, abort_error=None)
    with pytest.raises(MirrorError, match="recording progress failed: UNKNOWN") as raised:
        writer_over(producer).write([("k", b"v")])
    assert not isinstance(raised.value, ConcurrentWriter)
    assert producer.aborts == 1


def test_a_commit_that_says_fenced_needs_no_question():
    producer = CommitFails(KafkaError._FENCED, abort_error=None)
    with pytest.raises(ConcurrentWriter):
        writer_over(producer).write([("k", b"v")])
    assert producer.aborts == 0
