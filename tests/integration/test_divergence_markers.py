"""A reverse counts the records it saved only once their transaction's markers are on the partition.

A commit returns before the coordinator's markers reach the partition, and
until they do a read_committed reader sees none of the transaction: a reverse
counting at once found "30 to save, 0 saved" for records it had just committed.
A transaction left open stands in for markers that have not landed yet.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.operations import divergence


def _open_transaction(bootstrap: str, topic: str, records: int) -> Producer:
    writer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer"})
    writer.init_transactions(30)
    writer.begin_transaction()
    for i in range(records):
        writer.produce(topic, value=b"saved %d" % i, partition=0)
    writer.flush(30)
    return writer


def test_the_saved_records_are_counted_once_their_transaction_is_decided(source_bootstrap, create_topic, unique_name):
    topic = create_topic(source_bootstrap, unique_name("markers"))
    reader = kc.client_config({"bootstrap.servers": source_bootstrap}, "markers", "reader")
    writer = _open_transaction(source_bootstrap, topic, 30)
    assert divergence.saved_counts(reader, topic, 0).records == 0  # undecided: not visible yet

    committing = threading.Timer(1.0, writer.commit_transaction, args=(30,))
    started = time.monotonic()
    committing.start()
    divergence._wait_for_markers(reader, topic, 0)
    waited = time.monotonic() - started
    committing.join()
    assert waited >= 0.9, "it returned before the transaction was decided"
    assert divergence.saved_counts(reader, topic, 0).records == 30


def test_a_transaction_left_open_is_waited_for_no_longer_than_the_timeout(source_bootstrap, create_topic, unique_name):
    topic = create_topic(source_bootstrap, unique_name("markers-open"))
    reader = kc.client_config({"bootstrap.servers": source_bootstrap}, "markers", "reader")
    writer = _open_transaction(source_bootstrap, topic, 5)
    try:
        started = time.monotonic()
        divergence._wait_for_markers(reader, topic, 0, timeout=1.0)
        assert 1.0 <= time.monotonic() - started < 10
        # Then the count comes short, and the reverse refuses to go on (`reverse._save`).
        assert divergence.saved_counts(reader, topic, 0).records == 0
    finally:
        writer.abort_transaction(30)
