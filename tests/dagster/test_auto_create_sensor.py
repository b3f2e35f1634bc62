"""The auto-create sensor's ticks, evaluated against the real local pair (R-AC-1)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from mirror_pipeline.config import load_config
from mirror_pipeline.engine import create_mirror
from resources import MirrorConfigResource

LINK = "src-to-dst"
SENSOR = "src_to_dst_auto_create_sensor"
PARTITIONS = "src_to_dst_mirrors"
DEAD = "127.0.0.1:1"  # nothing listens there


def write_config(tmp_path: Path, source: str, destination: str, unique: str, *, enable: bool = True, name: str = "mirror.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({
        "clusters": {"src": {"bootstrap.servers": source}, "dst": {"bootstrap.servers": destination}},
        "links": {LINK: {
            "source": "src",
            "destination": "dst",
            "auto.create.mirror.topics.enable": enable,
            "auto.create.mirror.topics.filters": {"topicFilters": [
                {"name": unique, "patternType": "PREFIXED", "filterType": "INCLUDE"},
                {"name": f"{unique}-skip", "patternType": "LITERAL", "filterType": "EXCLUDE"},
            ]},
            # A registry only this test reads: the sensor acts on every mirror of the link.
            "mirror.state.topic": f"_mirror-pipeline.{unique}.state",
            "mirror.offset.map.topic": f"_mirror-pipeline.{unique}.offset-map",
        }},
    }))
    return path


def tick(config_path: Path, instance: dg.DagsterInstance, cursor: str | None, monkeypatch):
    monkeypatch.setenv("MIRROR_PIPELINE_CONFIG", str(config_path))
    from definitions import build_definitions

    defs = build_definitions(config_path)
    sensor = defs.get_repository_def().get_sensor_def(SENSOR)
    assert sensor.minimum_interval_seconds == 30
    with dg.build_sensor_context(
        instance=instance,
        # As in the daemon: with a ref, a run request's partition key is checked
        # against the partitions the same tick adds.
        instance_ref=instance.get_ref(),
        cursor=cursor,
        resources={"mirror_config": MirrorConfigResource(config_path=str(config_path))},
        definitions=defs,
    ) as context:
        return sensor.evaluate_tick(context)


def added(result) -> list[str]:
    """Partition keys the tick asks to add (every request is for the link's mirrors)."""
    assert all(r.partitions_def_name == PARTITIONS for r in result.dynamic_partitions_requests)
    return [key for r in result.dynamic_partitions_requests for key in r.partition_keys]


@pytest.fixture
def instance():
    """A persistent test instance: the daemon's kind (an ephemeral one has no ref)."""
    with dg.instance_for_test() as instance:
        yield instance


def test_tick_creates_mirrors_registers_partitions_and_requests_their_first_copy(
    instance, tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin, monkeypatch
):
    u = unique_name()
    first = create_topic(source_bootstrap, f"{u}-a", partitions=2)
    create_topic(source_bootstrap, f"{u}-skip")
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, u)

    result = tick(path, instance, None, monkeypatch)

    assert added(result) == [first]
    (request,) = result.run_requests
    assert request.partition_key == first
    assert request.tags["mirror-pipeline/link"] == LINK
    assert json.loads(result.cursor) == {"mirrors": [first]}
    assert first in admin(destination_bootstrap).list_topics(timeout=10).topics
    assert f"{u}-skip" not in admin(destination_bootstrap).list_topics(timeout=10).topics
    instance.add_dynamic_partitions(PARTITIONS, added(result))

    # Nothing new: no run, no partition, and the skip says what the scan found.
    quiet = tick(path, instance, result.cursor, monkeypatch)
    assert quiet.run_requests == [] and quiet.dynamic_partitions_requests == []
    assert "0 mirror(s) created, 1 existing" in quiet.skip_message

    # Two new topics, and a mirror created by hand (not through the filters) since the last tick.
    second = create_topic(source_bootstrap, f"{u}-b")
    third = create_topic(source_bootstrap, f"{u}-c")
    by_hand = create_topic(source_bootstrap, unique_name("by-hand"))
    create_mirror(load_config(path), LINK, by_hand)

    busy = tick(path, instance, quiet.cursor, monkeypatch)

    assert added(busy) == sorted([second, third, by_hand])
    (request,) = busy.run_requests
    # One run over the new mirrors: partitions are ordered [a, <added, sorted>], so the
    # range from the first to the last added key covers exactly them.
    new = sorted([second, third, by_hand])
    assert request.tags["dagster/asset_partition_range_start"] == new[0]
    assert request.tags["dagster/asset_partition_range_end"] == new[-1]
    assert request.tags["mirror-pipeline/link"] == LINK
    assert json.loads(busy.cursor) == {"mirrors": sorted([first, second, third, by_hand])}


def test_tick_registers_mirrors_missing_from_the_partitions_without_a_copy_run(
    instance, tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch
):
    u = unique_name()
    topic = create_topic(source_bootstrap, f"{u}-a")
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, u)
    create_mirror(load_config(path), LINK, topic)

    # A fresh sensor (no cursor) over a mirror that exists already: registered, not re-copied.
    result = tick(path, instance, None, monkeypatch)

    assert added(result) == [topic]
    assert result.run_requests == []
    assert "0 mirror(s) created, 1 existing" in result.skip_message


def test_tick_skips_when_auto_create_is_off_or_a_cluster_does_not_answer(
    instance, tmp_path, source_bootstrap, destination_bootstrap, unique_name, monkeypatch
):
    u = unique_name()
    off = write_config(tmp_path, source_bootstrap, destination_bootstrap, u, enable=False)
    result = tick(off, instance, None, monkeypatch)
    assert result.run_requests == []
    assert f"auto-create is off for link {LINK}" in result.skip_message

    down = write_config(tmp_path, source_bootstrap, DEAD, u, name="down.yaml")
    result = tick(down, instance, '{"mirrors": []}', monkeypatch)
    assert result.run_requests == [] and result.dynamic_partitions_requests == []
    assert "cluster 'dst'" in result.skip_message
    assert result.cursor == '{"mirrors": []}'
