"""The auto-create sensor's ticks and the run it requests, against the real local pair (R-AC-1)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from mirror_pipeline.config.loader import load_config
from mirror_pipeline.engine import create_mirror
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.resources import MirrorEngine

LINK = "src-to-dst"
SENSOR = "src_to_dst_auto_create_sensor"
AUTO_CREATE_JOB = "src_to_dst_auto_create"
REPLICATE_JOB = "src_to_dst_replicate"
PARTITIONS = "src_to_dst_mirrors"
DEAD = "127.0.0.1:1"  # nothing listens there


def write_config(
    tmp_path: Path, source: str, destination: str, unique: str, *, enable: bool = True, name: str = "mirror.yaml"
) -> Path:
    path = tmp_path / name
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {"src": {"bootstrap.servers": source}, "dst": {"bootstrap.servers": destination}},
                "links": {
                    LINK: {
                        "source": "src",
                        "destination": "dst",
                        "auto.create.mirror.topics.enable": enable,
                        "auto.create.mirror.topics.filters": {
                            "topicFilters": [
                                {"name": unique, "patternType": "PREFIXED", "filterType": "INCLUDE"},
                                {"name": f"{unique}-skip", "patternType": "LITERAL", "filterType": "EXCLUDE"},
                            ]
                        },
                        # A registry only this test reads: the sensor acts on every mirror of the link.
                        "mirror.state.topic": f"_mirror-pipeline.{unique}.state",
                        "mirror.offset.map.topic": f"_mirror-pipeline.{unique}.offset-map",
                    }
                },
            }
        )
    )
    return path


def tick(config_path: Path, instance: dg.DagsterInstance, cursor: str | None):
    defs = build_definitions(config_path)
    sensor = defs.get_repository_def().get_sensor_def(SENSOR)
    assert sensor.minimum_interval_seconds == 30
    with dg.build_sensor_context(
        instance=instance,
        # As in the daemon: with a ref, a run request's partition key is checked
        # against the partitions the same tick adds.
        instance_ref=instance.get_ref(),
        cursor=cursor,
        resources={"mirror_engine": MirrorEngine(config_path=str(config_path))},
        definitions=defs,
    ) as context:
        return sensor.evaluate_tick(context)


def run_auto_create(config_path: Path, instance: dg.DagsterInstance) -> dict:
    """What the daemon launches for the sensor's auto-create request."""
    job = build_definitions(config_path).get_job_def(AUTO_CREATE_JOB)
    result = job.execute_in_process(instance=instance)
    assert result.success
    return result.output_for_node("src_to_dst_auto_create_mirrors")


def requests_of(result, job: str) -> list:
    return [r for r in result.run_requests if r.job_name == job]


def added(result) -> list[str]:
    """Partition keys the tick asks to add (every request is for the link's mirrors)."""
    assert all(r.partitions_def_name == PARTITIONS for r in result.dynamic_partitions_requests)
    return [key for r in result.dynamic_partitions_requests for key in r.partition_keys]


@pytest.fixture
def instance():
    """A persistent test instance: the daemon's kind (an ephemeral one has no ref)."""
    with dg.instance_for_test() as instance:
        yield instance


def test_tick_requests_the_creation_then_the_first_copy_and_creates_nothing_itself(
    instance, tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name, admin
):
    u = unique_name()
    first = create_topic(source_bootstrap, f"{u}-a", partitions=2)
    create_topic(source_bootstrap, f"{u}-skip")
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, u)

    result = tick(path, instance, None)

    # The sensor only asks: one auto-create run, and the destination is untouched.
    (request,) = result.run_requests
    assert request.job_name == AUTO_CREATE_JOB
    assert request.tags["mirror-pipeline/housekeeping"] == LINK
    assert first not in admin(destination_bootstrap).list_topics(timeout=10).topics
    assert json.loads(result.cursor) == {"mirrors": []}

    created = run_auto_create(path, instance)
    assert [o["mirror_topic"] for o in created["created"]] == [first]
    assert first in admin(destination_bootstrap).list_topics(timeout=10).topics
    assert f"{u}-skip" not in admin(destination_bootstrap).list_topics(timeout=10).topics
    assert list(instance.get_dynamic_partitions(PARTITIONS)) == [first]  # the run registered it

    # The next tick gives the new mirror its first copy, and asks for no creation.
    copy = tick(path, instance, result.cursor)
    (request,) = copy.run_requests
    assert request.job_name == REPLICATE_JOB and request.partition_key == first
    assert request.tags["mirror-pipeline/link"] == LINK
    assert json.loads(copy.cursor) == {"mirrors": [first]}

    # Nothing new: no run, no partition, and the skip says what the scan found.
    quiet = tick(path, instance, copy.cursor)
    assert quiet.run_requests == [] and quiet.dynamic_partitions_requests == []
    assert "1 mirror(s), 0 source topic(s) to mirror" in quiet.skip_message

    # Two new topics, and a mirror created by hand (not through the filters) since the last tick.
    second = create_topic(source_bootstrap, f"{u}-b")
    third = create_topic(source_bootstrap, f"{u}-c")
    by_hand = create_topic(source_bootstrap, unique_name("by-hand"))
    create_mirror(load_config(path), LINK, by_hand)

    busy = tick(path, instance, quiet.cursor)
    assert added(busy) == [by_hand]
    (copy_by_hand,) = requests_of(busy, REPLICATE_JOB)
    assert copy_by_hand.partition_key == by_hand
    assert len(requests_of(busy, AUTO_CREATE_JOB)) == 1
    instance.add_dynamic_partitions(PARTITIONS, added(busy))

    run_auto_create(path, instance)
    after = tick(path, instance, busy.cursor)
    (request,) = after.run_requests
    # One run over the new mirrors: partitions are ordered [a, by-hand, b, c], so the
    # range from the first to the last new key covers exactly them.
    assert request.tags["dagster/asset_partition_range_start"] == second
    assert request.tags["dagster/asset_partition_range_end"] == third
    assert json.loads(after.cursor) == {"mirrors": sorted([first, second, third, by_hand])}


def test_tick_registers_mirrors_missing_from_the_partitions_without_a_copy_run(
    instance, tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    u = unique_name()
    topic = create_topic(source_bootstrap, f"{u}-a")
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, u)
    create_mirror(load_config(path), LINK, topic)

    # A fresh sensor (no cursor) over a mirror that exists already: registered, not re-copied.
    result = tick(path, instance, None)

    assert added(result) == [topic]
    assert result.run_requests == []
    assert "1 mirror(s), 0 source topic(s) to mirror" in result.skip_message


def test_tick_skips_when_auto_create_is_off_or_a_cluster_does_not_answer(
    instance, tmp_path, source_bootstrap, destination_bootstrap, unique_name
):
    u = unique_name()
    off = write_config(tmp_path, source_bootstrap, destination_bootstrap, u, enable=False)
    result = tick(off, instance, None)
    assert result.run_requests == []
    assert f"auto-create is off for link {LINK}" in result.skip_message

    down = write_config(tmp_path, source_bootstrap, DEAD, u, name="down.yaml")
    result = tick(down, instance, '{"mirrors": []}')
    assert result.run_requests == [] and result.dynamic_partitions_requests == []
    assert "cluster 'dst'" in result.skip_message
    assert result.cursor == '{"mirrors": []}'
