"""Topologies across three real clusters, built by auto-create (R-TP-1, R-TP-2, R-AC-1).

us-west, us-east and eu-west; every link uses `DefaultReplicationPolicy`, so a
mirror's name records where it came from (`us-west.orders`, then
`us-east.us-west.orders`). Every test declares the same four links (only their
filters differ), so no test's registry ever looks like a dropped link to
another's (R-LC-6), and each test keeps its links' state in state topics of
its own (R-TP-4): the clusters are shared with tests whose `west-to-east`
uses other naming.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import PipelineConfig, load_config
from tests.config_files import TEST_FENCE_WAIT_MS
from tests.kafka_records import assert_identical, read_topic

# name -> (source, destination); us-east is the destination of `west-to-east` only.
LINKS = {
    "west-to-east": ("us-west", "us-east"),
    "east-to-west": ("us-east", "us-west"),
    "east-to-eu": ("us-east", "eu-west"),
    "west-to-eu": ("us-west", "eu-west"),
}


def include(prefix: str) -> dict:
    return {"name": prefix, "patternType": "PREFIXED", "filterType": "INCLUDE"}


@pytest.fixture
def bootstraps(source_bootstrap, destination_bootstrap, third_bootstrap) -> dict[str, str]:
    return {"us-west": source_bootstrap, "us-east": destination_bootstrap, "eu-west": third_bootstrap}


@pytest.fixture
def topology(tmp_path: Path, bootstraps, unique_name):
    """Factory: `topology({link: [filters]})` -> config declaring all four links, auto-create
    on where filters are given. Afterwards every mirror the test's links made is deleted."""
    tag = unique_name("state")

    def write(filters: dict[str, list[dict]], name: str = "mirror.yaml") -> PipelineConfig:
        links = {}
        for link, (source, destination) in LINKS.items():
            links[link] = {
                "source": source,
                "destination": destination,
                "replication.policy.class": "DefaultReplicationPolicy",
                "auto.create.mirror.topics.enable": bool(filters.get(link)),
            }
            if filters.get(link):
                links[link]["auto.create.mirror.topics.filters"] = {"topicFilters": filters[link]}
        path = tmp_path / name
        path.write_text(
            yaml.safe_dump(
                {
                    "clusters": {alias: {"bootstrap.servers": b} for alias, b in bootstraps.items()},
                    "defaults": {
                        "mirror.state.topic": f"_mirror-pipeline.{tag}.state",
                        "mirror.offset.map.topic": f"_mirror-pipeline.{tag}.offset-map",
                        "mirror.writer.fence.wait.ms": TEST_FENCE_WAIT_MS,
                    },
                    "links": links,
                    "spark": {"master": "local[2]"},
                },
                sort_keys=False,
            )
        )
        return load_config(path)

    yield write
    # Auto-create off (its filters cleared), so nothing refuses the deletes (R-AC-4).
    off = write({}, name="cleanup.yaml")
    for link in LINKS:
        names = [m.mirror_topic for m in engine.list_mirrors(off, link)]
        if names:
            engine.delete_mirrors(off, link, names)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, tag: str = "") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, key=f"{tag}k{i}".encode(), value=f"{tag}v{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def scan_and_cycle(config: PipelineConfig, link: str, spark):
    """What `mirror-pipeline run --link` does: auto-create, then one cycle over the link's mirrors."""
    result = engine.auto_create(config, link)
    assert result.errors == {}
    if result.mirrors:
        engine.run_cycle(config, link, spark, mirrors=sorted(result.mirrors))
    return result


def topics_with(admin, bootstrap: str, fragment: str) -> set[str]:
    return {t for t in admin(bootstrap).list_topics(timeout=10).topics if fragment in t}


def test_bidirectional_pair_with_filters_both_ways_never_loops(
    topology, bootstraps, spark, create_topic, unique_name, admin
):
    u = unique_name()
    west, east = bootstraps["us-west"], bootstraps["us-east"]
    a = create_topic(west, f"{u}-a", partitions=2)
    b = create_topic(east, f"{u}-b")
    # Each side selects its own topics AND the other side's mirrors of them, as a
    # broad pattern both ways would: only the policy's loop detection stops a ping-pong.
    config = topology(
        {
            "west-to-east": [include(u), include(f"us-east.{u}")],
            "east-to-west": [include(u), include(f"us-west.{u}")],
        }
    )

    for round_ in range(3):
        produce(west, a, 10, partitions=2, tag=f"r{round_}")
        produce(east, b, 10, tag=f"r{round_}")
        to_east = scan_and_cycle(config, "west-to-east", spark)
        to_west = scan_and_cycle(config, "east-to-west", spark)

    assert topics_with(admin, east, u) == {b, f"us-west.{a}"}
    assert topics_with(admin, west, u) == {a, f"us-east.{b}"}
    assert "would loop" in to_east.skipped[f"us-east.{b}"]
    assert "would loop" in to_west.skipped[f"us-west.{a}"]
    assert_identical(read_topic(west, a, 2), read_topic(east, f"us-west.{a}", 2))
    assert_identical(read_topic(east, b, 1), read_topic(west, f"us-east.{b}", 1))


def test_chain_stacks_names_and_copies_the_data_identically_end_to_end(
    topology, bootstraps, spark, create_topic, unique_name, admin
):
    u = unique_name()
    west, eu = bootstraps["us-west"], bootstraps["eu-west"]
    t = create_topic(west, f"{u}-orders", partitions=3)
    config = topology({"west-to-east": [include(u)], "east-to-eu": [include(f"us-west.{u}")]})

    produce(west, t, 60, partitions=3)
    assert scan_and_cycle(config, "west-to-east", spark).created == [f"us-west.{t}"]
    assert scan_and_cycle(config, "east-to-eu", spark).created == [f"us-east.us-west.{t}"]
    assert_identical(read_topic(west, t, 3), read_topic(eu, f"us-east.us-west.{t}", 3))

    # Later records travel the whole chain too.
    produce(west, t, 30, partitions=3, tag="later")
    scan_and_cycle(config, "west-to-east", spark)
    scan_and_cycle(config, "east-to-eu", spark)
    assert_identical(read_topic(west, t, 3), read_topic(eu, f"us-east.us-west.{t}", 3))
    assert topics_with(admin, eu, u) == {f"us-east.us-west.{t}"}


def test_fan_out_copies_one_topic_to_two_clusters(topology, bootstraps, spark, create_topic, unique_name):
    u = unique_name()
    west, east, eu = bootstraps["us-west"], bootstraps["us-east"], bootstraps["eu-west"]
    t = create_topic(west, f"{u}-events", partitions=2)
    produce(west, t, 40, partitions=2)
    config = topology({"west-to-east": [include(u)], "west-to-eu": [include(u)]})

    assert scan_and_cycle(config, "west-to-east", spark).created == [f"us-west.{t}"]
    assert scan_and_cycle(config, "west-to-eu", spark).created == [f"us-west.{t}"]

    source = read_topic(west, t, 2)
    assert_identical(source, read_topic(east, f"us-west.{t}", 2))
    assert_identical(source, read_topic(eu, f"us-west.{t}", 2))


def test_fan_in_keeps_same_named_topics_of_two_clusters_apart(
    topology, bootstraps, spark, create_topic, unique_name, admin
):
    u = unique_name()
    west, east, eu = bootstraps["us-west"], bootstraps["us-east"], bootstraps["eu-west"]
    same = f"{u}-same"
    create_topic(west, same)
    create_topic(east, same)
    produce(west, same, 25, tag="west")
    produce(east, same, 15, tag="east")
    config = topology({"west-to-eu": [include(u)], "east-to-eu": [include(u)]})

    assert scan_and_cycle(config, "west-to-eu", spark).created == [f"us-west.{same}"]
    assert scan_and_cycle(config, "east-to-eu", spark).created == [f"us-east.{same}"]

    assert topics_with(admin, eu, u) == {f"us-west.{same}", f"us-east.{same}"}
    assert_identical(read_topic(west, same, 1), read_topic(eu, f"us-west.{same}", 1))
    assert_identical(read_topic(east, same, 1), read_topic(eu, f"us-east.{same}", 1))
