"""Races on a partition's offset map between two drivers (R-REL-2), on the real local pair.

Each test holds one driver between two of its steps, lets another cycle run
to completion right there, and then lets the first one go on: the
interleaving a racing pair of `run --link` processes produces now and then,
made certain.
"""

from __future__ import annotations

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.state_store import SlotWriter
from mirror_pipeline.replication import cycle
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, load_source, read_topic


def test_a_merge_decided_before_another_cycle_merged_unmaps_nothing(
    write_config, spark, monkeypatch, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    config = load_config(write_config({"mirror.chunk.max.records": 100}))
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=3000, partitions=1)
    engine.create_mirror(config, LINK, topic)
    held = []
    # A driver that has copied (30 segments) and not merged yet.
    monkeypatch.setattr(cycle, "_consolidate", lambda ctx, plan: held.append((ctx, plan)))
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    monkeypatch.undo()
    ((ctx, plan),) = held
    assert len(ctx.store.read_segments([topic]).segments[(topic, 0)]) > cycle.CONSOLIDATE_AFTER

    # Just before it fences to merge, another cycle copies more and merges everything.
    load_source(source_bootstrap, topic, records=1000, partitions=1)
    fence = SlotWriter.fence
    raced = []

    def fence_after_another_cycle(writer, *args, **kwargs):
        if not raced:
            raced.append(engine.run_cycle(config, LINK, spark, mirrors=[topic]))
        return fence(writer, *args, **kwargs)

    monkeypatch.setattr(SlotWriter, "fence", fence_after_another_cycle)
    cycle._consolidate(ctx, plan)
    monkeypatch.undo()
    assert raced and raced[0].lag_after == 0

    # The map still accounts for every record: a cycle finds nothing foreign and nothing to copy.
    after = engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert after.lag_after == 0
    assert_identical(read_topic(source_bootstrap, topic, 1), read_topic(destination_bootstrap, topic, 1))
