"""A task taking over waits for a transaction in flight on the offset map before it fences
(`hand_over.await_quiet_map`), on the real destination cluster."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from mirror_pipeline.replication.hand_over import await_quiet_map


def _open_transaction(bootstrap: str, topic: str, tag: str) -> Producer:
    """A transaction whose record has landed, not yet committed."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"quiet-map-{tag}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"v")
    assert producer.flush(30) == 0
    return producer


def test_the_wait_ends_when_the_transaction_in_flight_commits(destination_bootstrap, unique_name, create_topic, admin):
    topic = create_topic(destination_bootstrap, unique_name("map"))
    plain = Producer({"bootstrap.servers": destination_bootstrap})
    plain.produce(topic, value=b"before")  # a record outside any transaction: never waited for
    assert plain.flush(30) == 0
    producer = _open_transaction(destination_bootstrap, topic, topic)
    commit_started: list[float] = []

    def commit_later() -> None:
        time.sleep(0.5)
        commit_started.append(time.monotonic())
        producer.commit_transaction(30)

    committer = threading.Thread(target=commit_later)
    committer.start()
    try:
        assert await_quiet_map(admin(destination_bootstrap), topic, "destination", wait_s=30)
        returned_at = time.monotonic()
    finally:
        committer.join()
    assert commit_started and returned_at >= commit_started[0], "it went ahead while the transaction was open"


def test_a_transaction_left_open_does_not_hold_the_fence_back(destination_bootstrap, unique_name, create_topic, admin):
    topic = create_topic(destination_bootstrap, unique_name("map"))
    producer = _open_transaction(destination_bootstrap, topic, topic)
    try:
        assert not await_quiet_map(admin(destination_bootstrap), topic, "destination", wait_s=0.3)
    finally:
        producer.abort_transaction(30)
    assert await_quiet_map(admin(destination_bootstrap), topic, "destination", wait_s=30)


def test_a_map_with_no_transaction_in_flight_is_quiet_at_once(destination_bootstrap, unique_name, create_topic, admin):
    topic = create_topic(destination_bootstrap, unique_name("map"))
    assert await_quiet_map(admin(destination_bootstrap), topic, "destination", wait_s=30)
    producer = _open_transaction(destination_bootstrap, topic, topic)
    producer.commit_transaction(30)
    assert await_quiet_map(admin(destination_bootstrap), topic, "destination", wait_s=30)
