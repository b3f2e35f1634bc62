"""Follow mode's epochs hand over while records keep arriving (`replication.epochs`), on the real local pair.

Each epoch after the first is planned and started while the one before still
copies, and takes its partitions over at that epoch's end: the epochs
overlap, each partition's ranges join end to start, and the mirror holds
every record once. Each task closes its reservations (`replication.reservations`)
before its hand-over: the offset map the epochs leave covers the whole mirror.
"""

from __future__ import annotations

import threading
import time
import warnings

from confluent_kafka import Consumer, Producer, TopicPartition

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_map import resolve_keyed
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, load_source, read_topic

PARTITIONS = 3
EPOCH_S = 4.0
EPOCHS = 4


class _Epochs:
    """The report follow mode gives its epochs to: stops it once `count` are reported."""

    def __init__(self, stop: threading.Event, count: int = EPOCHS):
        self.stop, self.seen, self.count = stop, [], count

    def epoch(self, epoch) -> None:
        self.seen.append(epoch)
        if len(self.seen) >= self.count:
            self.stop.set()

    def synced(self, kind, result, error) -> None:
        pass


def watermark_of(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hand-over-check"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


def assert_map_covers_the_mirror(config, bootstrap: str, topic: str) -> None:
    """No reservation is open and the offset map reaches every partition's log end."""
    segments = LinkContext.open(config, LINK).store.read_segments([topic]).segments
    for p in range(PARTITIONS):
        keyed, end = segments[(topic, p)], watermark_of(bootstrap, topic, p)
        assert not [seg for _, seg in keyed if seg.open], f"partition {p}: a reservation was left open"
        assert resolve_keyed(keyed, end).offset_map.dest_end == end


def _produce_until(done: threading.Event, bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not done.is_set():
        for p in range(PARTITIONS):
            producer.produce(topic, key=b"live-%d" % i, value=b"v" * 100, partition=p)
            i += 1
        producer.poll(0)
        done.wait(0.01)
    assert producer.flush(30) == 0


def test_epochs_overlap_and_their_ranges_join_under_a_live_producer(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    config = load_config(write_config({}))
    topic = unique_name()
    create_topic(source_bootstrap, topic, partitions=PARTITIONS)
    load_source(source_bootstrap, topic, records=3000, partitions=PARTITIONS)
    engine.create_mirror(config, LINK, topic)

    stop, done = threading.Event(), threading.Event()
    report = _Epochs(stop)
    producer = threading.Thread(target=_produce_until, args=(done, source_bootstrap, topic))
    producer.start()
    try:
        engine.follow(config, LINK, spark, report, stop, epoch_s=EPOCH_S, mirrors=[topic])
    finally:
        done.set()
        producer.join()

    epochs = report.seen
    assert len(epochs) >= EPOCHS
    assert all(not e.error for e in epochs), [e.error for e in epochs if e.error]
    for before, after in zip(epochs, epochs[1:], strict=False):
        # Planned and started while the epoch before still copied, not after it ended.
        assert after.result.started_at < before.result.started_at + before.result.duration_s
        ended = {c.partition: c for c in before.result.mirrors[topic].partitions}
        for copy in after.result.mirrors[topic].partitions:
            assert (copy.source_from, copy.dest_from) == (
                ended[copy.partition].source_until,
                ended[copy.partition].dest_until,
            ), f"epoch {after.number} partition {copy.partition} does not start where epoch {before.number} ended"
    assert sum(c.records for e in epochs for c in e.result.mirrors[topic].partitions) > 3000
    # Each task closed its reservations (`replication.reservations`): nothing of the map is in doubt.
    assert_map_covers_the_mirror(config, destination_bootstrap, topic)

    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
    assert_identical(
        read_topic(source_bootstrap, topic, PARTITIONS), read_topic(destination_bootstrap, topic, PARTITIONS)
    )


def test_a_mirror_paused_mid_epoch_has_its_reservations_closed_at_what_landed(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    """The task that finds the mirror paused after the pause's fence closes the mirror's open
    reservations: its resume then finds nothing in doubt (no fence wait before copying again)."""
    config = load_config(write_config({}))
    topic = unique_name()
    create_topic(source_bootstrap, topic, partitions=PARTITIONS)
    engine.create_mirror(config, LINK, topic)
    stop, done = threading.Event(), threading.Event()
    report = _Epochs(stop)
    producer = threading.Thread(target=_produce_until, args=(done, source_bootstrap, topic))
    follower = threading.Thread(
        target=engine.follow,
        args=(config, LINK, spark, report, stop),
        kwargs={"epoch_s": 60.0, "mirrors": [topic]},
    )
    producer.start()
    follower.start()
    try:
        deadline = time.monotonic() + 60
        while sum(watermark_of(destination_bootstrap, topic, p) for p in range(PARTITIONS)) < 300:
            assert time.monotonic() < deadline, "follow mode copied nothing"
            time.sleep(0.5)
        engine.pause(config, LINK, [topic])
        # A reservation's window (1 s), then the task's next announcement is refused and it closes
        # them; on a machine loaded by the rest of the suite that took over 4 s once.
        left_open = _open_after(config, destination_bootstrap, topic, settle_s=30)
    finally:
        stop.set()
        done.set()
        producer.join()
        follower.join(120)
    if left_open:
        # A partition whose round failed before the pause's fence was found (a round not acknowledged
        # within the writers' delivery timeout on a loaded machine, say) stopped with its last chunk in
        # doubt, by design; the epoch reports it, and the resume's plan settles that chunk.
        failed = [e.error for e in report.seen if topic in e.error]
        assert failed, f"{left_open} left open, and no epoch reported a failure of the mirror: {report.seen}"
        warnings.warn(f"{left_open}: stopped before its task found the pause; the epoch said: {failed}", stacklevel=1)
    engine.resume(config, LINK, [topic])
    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
    assert_map_covers_the_mirror(config, destination_bootstrap, topic)
    assert_identical(
        read_topic(source_bootstrap, topic, PARTITIONS), read_topic(destination_bootstrap, topic, PARTITIONS)
    )


def _open_after(config, bootstrap: str, topic: str, settle_s: float) -> str:
    """What of the mirror's offset map is still in doubt `settle_s` after now ("" once nothing is)."""
    settled_by = time.monotonic() + settle_s
    while True:
        try:
            assert_map_covers_the_mirror(config, bootstrap, topic)
            return ""
        except AssertionError as exc:
            if time.monotonic() > settled_by:
                return str(exc).splitlines()[0]
            time.sleep(0.5)
