"""Internal topics an earlier version made get this version's cleaning settings (`link.internal_topic_cleaning`)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link import internal_topic_cleaning
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.internal_topic_cleaning import CLEANING, settle_cleaning
from mirror_pipeline.link.state_store import STATE_TOPIC_CONFIG
from tests.config_files import write_pair_config

EARLIER = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "retention.ms": "-1"}  # no cleaning settings


def _own_settings(admin, topic: str) -> dict[str, str]:
    """The topic's settings of its own (not the broker's), of those CLEANING names."""
    entries = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    found = next(iter(entries.values())).result()
    return {
        name: entry.value
        for name, entry in found.items()
        if name in CLEANING and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def _take_back(admin, topic: str, names: list[str]) -> None:
    """Remove the topic's own values of `names` (the broker's apply again)."""
    entries = [ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE) for name in names]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result()


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a new process: nothing seen to yet."""
    monkeypatch.setattr(internal_topic_cleaning, "_tried", set())


def test_new_internal_topics_are_made_with_the_settings_given_to_earlier_ones():
    assert {name: STATE_TOPIC_CONFIG[name] for name in CLEANING} == CLEANING


def test_an_earlier_versions_topic_gets_the_settings_and_an_operators_own_value_stays(
    fresh_process, destination_bootstrap, create_topic, unique_name
):
    admin = kc.admin_client({"bootstrap.servers": destination_bootstrap})
    earlier = create_topic(destination_bootstrap, unique_name("earlier"), config=EARLIER)
    tuned = create_topic(destination_bootstrap, unique_name("tuned"), config={**EARLIER, "segment.ms": "3600000"})
    absent = unique_name("absent")

    given = settle_cleaning(admin, "b", destination_bootstrap, [earlier, tuned, absent])

    assert given == {earlier: CLEANING, tuned: {"delete.retention.ms": "600000"}}
    assert _own_settings(admin, earlier) == CLEANING
    assert _own_settings(admin, tuned) == {"segment.ms": "3600000", "delete.retention.ms": "600000"}
    assert kc.topic_partitions(admin, absent, "b") is None  # a missing topic is not made here
    # Once a process: an operator who takes a setting back later is not overruled by the next cycle.
    _take_back(admin, earlier, ["segment.ms"])
    assert settle_cleaning(admin, "b", destination_bootstrap, [earlier]) == {}


def test_a_cycle_gives_the_links_internal_topics_the_settings(
    fresh_process, tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    link = unique_name("link")
    topic = create_topic(source_bootstrap, unique_name("orders"), 1)
    config = load_config(write_pair_config(tmp_path / "mirror.yaml", source_bootstrap, destination_bootstrap, link))
    engine.create_mirror(config, link, topic)
    ctx = LinkContext.open(config, link)
    ctx.registry()
    map_topic = ctx.store.offset_map_topic
    admin = kc.admin_client({"bootstrap.servers": destination_bootstrap})
    assert _own_settings(admin, map_topic) == CLEANING  # made by this version
    # As an earlier version left it, seen by a new process.
    _take_back(admin, map_topic, list(CLEANING))
    internal_topic_cleaning._tried.clear()
    assert _own_settings(admin, map_topic) == {}

    engine.run_cycle(config, link, spark)

    assert _own_settings(admin, map_topic) == CLEANING
