"""A task copying many units together (`group_copy`) on the real local pair: one writer per slot.

The copy runs in this process (no Spark), so that a verb can be made to
land at an exact moment of it: between two rounds of a writer slot that two
mirrors share.
"""

from __future__ import annotations

import gc
import os
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import topic_shares
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_keys import LEGACY_WRITER_SLOTS, writer_slot
from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.model.states import WATCHED
from mirror_pipeline.replication import group_copy
from mirror_pipeline.replication.cycle import copy_context
from mirror_pipeline.replication.planner import plan_cycle
from mirror_pipeline.replication.split_reader import SplitReader
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, load_source, read_topic

RECORDS = 3000
CHUNK = 500


def slot_sharing_names(base: str, slots: int) -> tuple[str, str]:
    """Two topic names whose partition 0 maps to the same writer slot on a link of `slots` slots."""
    other = next(
        f"{base}-b{i}" for i in range(10_000) if writer_slot(f"{base}-b{i}", 0, slots) == writer_slot(base, 0, slots)
    )
    return base, other


def plan(config, topics: list[str]):
    ctx = LinkContext.open(config, LINK)
    selected = [m for m in ctx.registry().values() if m.mirror_topic in topics and m.state in WATCHED]
    return ctx, plan_cycle(ctx, selected)


# A link of many slots and one of a few: the pause must fence the slot the link's own count gives.
@pytest.mark.parametrize("slots", [LEGACY_WRITER_SLOTS, 4])
def test_a_pause_of_a_mirror_sharing_the_slot_stops_only_that_mirror(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch, slots
):
    tag = unique_name("slots")
    config = load_config(
        write_config(
            {
                "mirror.chunk.max.records": CHUNK,
                "mirror.writer.slots": slots,
                "mirror.state.topic": f"_{tag}.state",
                "mirror.offset.map.topic": f"_{tag}.map",
            }
        )
    )
    paused, going_on = slot_sharing_names(unique_name(), slots)
    for topic in (paused, going_on):
        create_topic(source_bootstrap, topic, partitions=1)
        load_source(source_bootstrap, topic, records=RECORDS, partitions=1)
        engine.create_mirror(config, LINK, topic)
    ctx, the_plan = plan(config, [paused, going_on])
    assert len(the_plan.units) == 2

    # Once the first round has landed, the operator pauses one mirror: the pause fences the shared slot.
    write = SlotWriter.write_segments
    calls = []

    def pause_before_the_second_round(writer, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            engine.pause(config, LINK, [paused])
        return write(writer, *args, **kwargs)

    monkeypatch.setattr(SlotWriter, "write_segments", pause_before_the_second_round)
    results = {r.mirror_topic: r for r in group_copy.copy_group(the_plan.units, copy_context(ctx))}
    monkeypatch.undo()

    assert results[paused].error_kind == "StateChanged", results[paused]
    assert results[paused].records < RECORDS
    # The other mirror's writer was taken back: it copied everything, without an error.
    assert not results[going_on].error, results[going_on]
    assert (results[going_on].records, results[going_on].dest_until) == (RECORDS, RECORDS)
    assert_identical(read_topic(source_bootstrap, going_on, 1), read_topic(destination_bootstrap, going_on, 1))

    # The paused mirror holds what landed before the pause; a cycle after resume copies the rest.
    held = read_topic(destination_bootstrap, paused, 1)
    assert len(held[0]) == results[paused].dest_until
    engine.resume(config, LINK, [paused])
    assert engine.run_cycle(config, LINK, spark, mirrors=[paused]).lag_after == 0
    assert_identical(read_topic(source_bootstrap, paused, 1), read_topic(destination_bootstrap, paused, 1))


def test_a_follow_task_that_starts_later_than_its_epoch_lasts_still_copies(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch
):
    """On a loaded machine a task's start (fencing, checks, clients) can outlast a short epoch: the
    epoch's length counts from when the task is ready, so every epoch makes progress."""
    config = load_config(write_config({"mirror.chunk.max.records": CHUNK}))
    topic = unique_name()
    create_topic(source_bootstrap, topic, partitions=1)
    load_source(source_bootstrap, topic, records=RECORDS, partitions=1)
    engine.create_mirror(config, LINK, topic)
    ctx = LinkContext.open(config, LINK)
    epoch_s = 1.0
    the_plan = plan_cycle(ctx, [ctx.registry()[topic]], follow_s=epoch_s)
    checks = group_copy.check_after_fencing

    def slow_start(*args, **kwargs):
        time.sleep(2 * epoch_s)  # longer than the epoch: counted from the plan, nothing was copied
        return checks(*args, **kwargs)

    monkeypatch.setattr(group_copy, "check_after_fencing", slow_start)
    (result,) = group_copy.copy_group(the_plan.units, copy_context(ctx))
    assert not result.error, result
    assert (result.records, result.dest_until) == (RECORDS, RECORDS)
    assert_identical(read_topic(source_bootstrap, topic, 1), read_topic(destination_bootstrap, topic, 1))


def _threads() -> Counter[str]:
    """This process's threads by name (librdkafka's are `rdk:main`, `rdk:broker0`, ...)."""
    names: Counter[str] = Counter()
    for tid in os.listdir("/proc/self/task"):
        with suppress(FileNotFoundError):  # one that ended since the listing
            names[Path(f"/proc/self/task/{tid}/comm").read_text().strip()] += 1
    return names


def _threads_started_since(before: Counter[str], timeout_s: float = 5.0) -> Counter[str]:
    """The threads started since `before` that are still listed, waited for up to `timeout_s`.

    A thread that was joined is still listed for a moment while it exits:
    Python's join returns once the thread let go of its interpreter state, and
    librdkafka's once the thread cleared its id, both before the kernel drops
    it (CI saw one such thread, on a loaded machine). A client left open keeps
    its threads running, so they are still here when the wait ends.
    """
    deadline = time.monotonic() + timeout_s
    while (started := _threads() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    return started


# One producer (opened before fencing) or two (after the checks); a task whose writers another cycle
# fenced again and again, whose failed writes' tracebacks hold them.
@pytest.mark.parametrize(("partitions", "records", "fenced"), [(4, 2, False), (80, 2, False), (2, 3 * CHUNK, True)])
def test_a_task_lets_go_of_its_clients_and_threads_when_it_ends(
    write_config,
    source_bootstrap,
    destination_bootstrap,
    create_topic,
    unique_name,
    monkeypatch,
    partitions,
    records,
    fenced,
):
    """A Spark worker runs its next task in the same process, and sits idle in between: a client
    of the task before that only a garbage collection would free stays open (its librdkafka
    threads and connections) until then, beside the next task's own."""
    config = load_config(write_config({"mirror.chunk.max.records": CHUNK}))
    topic = unique_name()
    create_topic(source_bootstrap, topic, partitions=partitions)
    load_source(source_bootstrap, topic, records=records * partitions, partitions=partitions)
    engine.create_mirror(config, LINK, topic)
    ctx, the_plan = plan(config, [topic])
    copying = copy_context(ctx)
    if fenced:
        write = SlotWriter.write_segments

        def another_cycle_takes_over(writer, *args, **kwargs):
            other = SlotWriter(copying.dest_properties, LINK, writer.slot, copying.offset_map_topic)
            other.fence()
            other.close()
            return write(writer, *args, **kwargs)

        monkeypatch.setattr(SlotWriter, "write_segments", another_cycle_takes_over)
    gc.collect()
    gc.disable()  # as in an idle worker, where nothing allocates enough to start a collection
    try:
        before = _threads()
        results = group_copy.copy_group(the_plan.units, copying)
        left_running = _threads_started_since(before)
    finally:
        gc.enable()
    if fenced:
        assert all(r.error_kind == "ConcurrentWriter" for r in results), results
    else:
        assert all(not r.error for r in results), results
        assert sum(r.records for r in results) == records * partitions
    assert not left_running, f"threads of the task left running after it ended: {dict(left_running)}"


def test_a_task_over_many_topics_reads_them_through_several_consumers_and_copies_each_whole(
    write_config, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch
):
    """A bounded task of many topics reads them through a consumer per share of its topics
    (`split_reader`); here a consumer per topic, three of them. A writer slot fenced once by
    another cycle mid-copy is taken back, and its partitions read again through theirs."""
    monkeypatch.setattr(topic_shares, "TOPICS_PER_CONSUMER", 1)
    config = load_config(write_config({"mirror.chunk.max.records": CHUNK}))
    topics = [unique_name() for _ in range(3)]
    for topic in topics:
        create_topic(source_bootstrap, topic, partitions=2)
        load_source(source_bootstrap, topic, records=2 * (2 * CHUNK + 17), partitions=2)
        engine.create_mirror(config, LINK, topic)
    ctx, the_plan = plan(config, topics)
    copying = copy_context(ctx)
    readers: list[object] = []
    open_reader = group_copy.open_reader

    def noted(*args, **kwargs):
        readers.append(reader := open_reader(*args, **kwargs))
        return reader

    monkeypatch.setattr(group_copy, "open_reader", noted)
    write, fenced = SlotWriter.write_segments, []

    def another_cycle_takes_over_once(writer, *args, **kwargs):
        if not fenced:
            fenced.append(writer.slot)
            other = SlotWriter(copying.dest_properties, LINK, writer.slot, copying.offset_map_topic)
            other.fence()
            other.close()
        return write(writer, *args, **kwargs)

    monkeypatch.setattr(SlotWriter, "write_segments", another_cycle_takes_over_once)
    before = _threads()
    results = group_copy.copy_group(the_plan.units, copying)
    left_running = _threads_started_since(before)

    (reader,) = readers
    assert isinstance(reader, SplitReader) and len(reader.consumers) == 3
    assert fenced, "a slot was fenced mid-copy"
    assert all(not r.error for r in results), results
    for topic in topics:
        assert_identical(read_topic(source_bootstrap, topic, 2), read_topic(destination_bootstrap, topic, 2))
    assert not left_running, f"threads of the task left running after it ended: {dict(left_running)}"
