"""A link's writer slot count (`mirror.writer.slots`) on the real local pair: a link copies under
the count it was created with, keeps it in its record, and refuses another while it has live
mirrors, since a writer of the old count would no longer be fenced by the new one's (R-CFG-4's
rule, for the identities a link's writers are fenced under); unset, a link follows its record.

Each test gives its link its own state and offset-map topics, so the record it writes never
meets another test's link of the same name on the shared clusters.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import WRITER_SLOTS_KEY, LinkContext
from mirror_pipeline.link.state_keys import LEGACY_WRITER_SLOTS
from mirror_pipeline.model.errors import ConfigError
from tests.integration.conftest import LINK
from tests.kafka_records import assert_identical, load_source, read_topic


def link_record(config) -> dict:
    ctx = LinkContext.open(config, LINK)
    return ctx.store.read_registry().links[LINK]


def test_a_link_copies_under_its_slot_count_and_refuses_another_while_it_has_live_mirrors(
    write_config, own_state, spark, admin, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    four = load_config(write_config({**own_state, "mirror.writer.slots": 4}))
    topic = create_topic(source_bootstrap, unique_name(), partitions=10)
    other = create_topic(source_bootstrap, unique_name("other"))
    load_source(source_bootstrap, topic, records=500, partitions=10)
    engine.create_mirror(four, LINK, topic)
    assert engine.run_cycle(four, LINK, spark, mirrors=[topic]).lag_after == 0
    assert_identical(read_topic(source_bootstrap, topic, 10), read_topic(destination_bootstrap, topic, 10))
    assert link_record(four)[WRITER_SLOTS_KEY] == 4

    eight = load_config(write_config({**own_state, "mirror.writer.slots": 8}))
    with pytest.raises(ConfigError) as refused:
        engine.create_mirror(eight, LINK, other)
    message = str(refused.value)
    assert f"links.{LINK}.mirror.writer.slots: cannot change from 4 to 8" in message
    assert topic in message and "cluster 'us-east'" in message and "Put the old value back" in message
    with pytest.raises(ConfigError, match="cannot change from 4 to 8"):
        engine.run_cycle(eight, LINK, spark)
    assert other not in admin(destination_bootstrap).list_topics(timeout=10).topics
    assert link_record(four)[WRITER_SLOTS_KEY] == 4

    # Once the link's only mirror is failed over, nothing is written under the old count: the new one holds.
    engine.failover(four, LINK, [topic])
    engine.create_mirror(eight, LINK, other)
    assert link_record(eight)[WRITER_SLOTS_KEY] == 8


def test_a_link_whose_record_predates_the_setting_keeps_the_64_slots_its_mirrors_were_written_under(
    write_config, own_state, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    unset_path = write_config(own_state)
    unset = load_config(unset_path)
    topic = create_topic(source_bootstrap, unique_name(), partitions=3)
    load_source(source_bootstrap, topic, records=90, partitions=3)
    engine.create_mirror(unset, LINK, topic)
    ctx = LinkContext.open(unset, LINK)
    assert ctx.writer_slots == 16  # a new link takes the default
    ctx.store.put_link_record({k: v for k, v in link_record(unset).items() if k != WRITER_SLOTS_KEY})

    # Upgraded with the setting unset, the link goes on under the count its mirrors were written under.
    assert LinkContext.open(unset, LINK).writer_slots == LEGACY_WRITER_SLOTS
    assert engine.run_cycle(unset, LINK, spark, mirrors=[topic]).lag_after == 0
    assert_identical(read_topic(source_bootstrap, topic, 3), read_topic(destination_bootstrap, topic, 3))
    described = CliRunner().invoke(cli, ["link", "describe", LINK, "--json", "--config", str(unset_path)])
    assert json.loads(described.output)["settings"]["mirror.writer.slots"] == LEGACY_WRITER_SLOTS, described.output
    sixteen = load_config(write_config({**own_state, "mirror.writer.slots": 16}))
    with pytest.raises(ConfigError, match=f"links.{LINK}.mirror.writer.slots: cannot change from 64 to 16"):
        engine.list_mirrors(sixteen, LINK)
