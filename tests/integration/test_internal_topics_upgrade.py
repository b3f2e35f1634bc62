"""Each link keeps its offset maps and checkpoints in topics of its own, and a link
whose state an earlier version wrote into the shared topics keeps them there.

The earlier state is made as that version left it: mirrors copied and groups
synced through `_mirror-pipeline.offset-map` and `_mirror-pipeline.checkpoints`,
and a link record that names no internal topic. Then the config says nothing
about internal topics, as an upgraded user's config does.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import ConfigError
from tests.config_files import write_pair_config
from tests.kafka_records import assert_identical, commit, read_topic

SHARED = {
    "mirror.offset.map.topic": "_mirror-pipeline.offset-map",
    "mirror.checkpoints.topic": "_mirror-pipeline.checkpoints",
}


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0


def _config(tmp_path, source, destination, link, group, **settings):
    filters = {"groupFilters": [{"name": group, "patternType": "LITERAL", "filterType": "INCLUDE"}]}
    return load_config(
        write_pair_config(
            tmp_path / "mirror.yaml",
            source,
            destination,
            link,
            {"consumer.offset.sync.enable": True, "consumer.offset.group.filters": filters, **settings},
        )
    )


def _settled(config, link: str) -> LinkContext:
    """The link's context once its registry told which internal topics its state is in."""
    ctx = LinkContext.open(config, link)
    ctx.registry()
    return ctx


def _copied_and_synced(config, link: str, topic: str, group: str, positions: dict, spark, source: str) -> LinkContext:
    engine.create_mirror(config, link, topic)
    assert engine.run_cycle(config, link, spark).lag_after == 0
    commit(source, group, topic, positions)
    engine.sync_offsets(config, link)
    return _settled(config, link)


def test_a_link_with_state_in_the_shared_topics_keeps_its_offset_maps_and_checkpoints(
    tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    link, group = unique_name("link"), unique_name("group")
    topic = create_topic(source_bootstrap, unique_name("orders"), 2)
    _produce(source_bootstrap, topic, 300)

    # What an earlier version left: everything in the shared topics, a record naming none.
    earlier = _config(tmp_path, source_bootstrap, destination_bootstrap, link, group, **SHARED)
    ctx = _copied_and_synced(earlier, link, topic, group, {0: 100, 1: 150}, spark, source_bootstrap)
    record = ctx._recorded_naming
    assert record["mirror.offset.map.topic"] == "_mirror-pipeline.offset-map"
    ctx.store.put_link_record({k: v for k, v in record.items() if k not in SHARED})

    upgraded = _config(tmp_path, source_bootstrap, destination_bootstrap, link, group)
    ctx = _settled(upgraded, link)
    assert (ctx.store.offset_map_topic, ctx.checkpoints_topic) == tuple(SHARED.values())

    # The map is where the mirror's records are accounted for: without it the
    # cycle would refuse them as records the link did not write.
    _produce(source_bootstrap, topic, 300)
    assert engine.run_cycle(upgraded, link, spark).lag_after == 0
    assert_identical(read_topic(source_bootstrap, topic, 2), read_topic(destination_bootstrap, topic, 2))
    exported = {(c.source_group, c.partition): c.source_offset for c in engine.export_offsets(upgraded, link)}
    assert exported == {(group, 0): 100, (group, 1): 150}

    # The next create records the names, so they stay put from then on.
    second = create_topic(source_bootstrap, unique_name("second"), 1)
    engine.create_mirror(upgraded, link, second)
    assert {k: _settled(upgraded, link)._recorded_naming[k] for k in SHARED} == SHARED

    # Moving a link with live mirrors off its topics would leave its maps behind: refused.
    moved = _config(
        tmp_path, source_bootstrap, destination_bootstrap, link, group, **{"mirror.offset.map.topic": f"_{link}.omap"}
    )
    with pytest.raises(
        ConfigError,
        match=r"mirror\.offset\.map\.topic: cannot change from "
        r"'_mirror-pipeline\.offset-map'",
    ):
        LinkContext.open(moved, link).registry()


def test_a_new_link_has_topics_of_its_own(
    tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    link, group = unique_name("link"), unique_name("group")
    topic = create_topic(source_bootstrap, unique_name("orders"), 2)
    _produce(source_bootstrap, topic, 100)
    config = _config(tmp_path, source_bootstrap, destination_bootstrap, link, group)
    ctx = _copied_and_synced(config, link, topic, group, {0: 10, 1: 20}, spark, source_bootstrap)
    own = {
        "mirror.offset.map.topic": f"_mirror-pipeline.{link}.offset-map",
        "mirror.checkpoints.topic": f"_mirror-pipeline.{link}.checkpoints",
    }
    assert (ctx.store.offset_map_topic, ctx.checkpoints_topic) == tuple(own.values())
    assert {k: ctx._recorded_naming[k] for k in own} == own
    assert ctx.store.state_topic == "_mirror-pipeline.state"  # the destination's registry stays shared
    assert len(engine.export_offsets(config, link)) == 2
