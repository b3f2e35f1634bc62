"""Follow mode keeps copying when its copy tasks start later than its epochs last (`replication.epoch_pace`).

Three threads of the same Spark application run one-task jobs of 2 s back to
back beside it, on its two task slots. Spark hands a freed slot to the job
that came first, so two of those jobs are always ahead of a new epoch's job:
its task waits for one of them to end, up to 2 s, twice the 1 s epochs
asked for. A task ready that close to its own hand-over leaves its
partitions to the next epoch (`hand_over.wait_for_start`); with epochs of
the length asked for most epochs would (a loaded machine once made five in a
row copy nothing). Follow mode lengthens its epochs from how late their
tasks were, so after the first few every epoch copies, and the mirror ends
identical to its source.
"""

from __future__ import annotations

import threading
import time

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from tests.integration.conftest import LINK
from tests.integration.test_follow_hand_over import _Epochs, _produce_until
from tests.kafka_records import assert_identical, load_source, read_topic

PARTITIONS = 3  # as `_produce_until` writes
EPOCH_S = 1.0
HOLD_S = 2.0  # how long each task of the jobs beside follow mode holds its slot
HOLDERS = 3
EPOCHS = 7
ON_TIME_AT_THE_END = 3  # the last epochs, which must all have copied


def _hold_a_slot(spark, done: threading.Event) -> None:
    """One single-task job after another, each holding a task slot HOLD_S."""
    while not done.is_set():
        spark.sparkContext.parallelize([HOLD_S], 1).foreach(lambda s: time.sleep(s))


def test_epochs_lengthen_until_tasks_that_start_late_copy(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    config = load_config(write_config({}))
    topic = unique_name()
    create_topic(source_bootstrap, topic, partitions=PARTITIONS)
    load_source(source_bootstrap, topic, records=1000, partitions=PARTITIONS)
    engine.create_mirror(config, LINK, topic)

    stop, done = threading.Event(), threading.Event()
    report = _Epochs(stop, EPOCHS)
    beside = [threading.Thread(target=_hold_a_slot, args=(spark, done)) for _ in range(HOLDERS)]
    beside.append(threading.Thread(target=_produce_until, args=(done, source_bootstrap, topic)))
    for thread in beside:
        thread.start()
    try:
        time.sleep(1.0)  # the other jobs hold both slots first
        engine.follow(config, LINK, spark, report, stop, epoch_s=EPOCH_S, mirrors=[topic])
    finally:
        done.set()
        for thread in beside:
            thread.join()

    epochs = report.seen
    assert all(not e.error for e in epochs), [e.error for e in epochs if e.error]
    left = [e.result.left_to_next_epoch for e in epochs]
    copied = [e.result.records for e in epochs]
    # Some epoch left its partitions (the tasks were late: the test meets what it is about) ...
    assert any(left), (left, copied)
    # ... and, lengthened, the last ones copied: none left a partition.
    assert left[-ON_TIME_AT_THE_END:] == [0] * ON_TIME_AT_THE_END, (left, copied)
    assert all(copied[-ON_TIME_AT_THE_END:]), (left, copied)

    assert engine.run_cycle(config, LINK, spark, mirrors=[topic]).lag_after == 0
    assert_identical(
        read_topic(source_bootstrap, topic, PARTITIONS), read_topic(destination_bootstrap, topic, PARTITIONS)
    )
