"""Source topics as observable source assets, and a chain of links drawn as one graph (issue #13).

Offline: the clusters are loopback ports where nothing listens; the
observation runs with the engine's reads stubbed.
"""

from __future__ import annotations

import socket
from pathlib import Path

import dagster as dg
import pytest

from mirror_pipeline.model.results import MirrorDescription, PartitionStatus
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.source_topics import chain_upstreams
from tests.dagster.offline_config import mirrors_answer, stub_engine

# us-west -> us-east -> eu-west, and the failback link of the second hop.
CHAIN_CONFIG = """\
clusters:
  us-west:
    bootstrap.servers: 127.0.0.1:19997
  us-east:
    bootstrap.servers: 127.0.0.1:29997
  eu-west:
    bootstrap.servers: 127.0.0.1:39997
links:
  west-to-east:
    source: us-west
    destination: us-east
  east-to-eu:
    source: us-east
    destination: eu-west
  eu-to-east:
    source: eu-west
    destination: us-east
"""


def key(*path: str) -> dg.AssetKey:
    return dg.AssetKey(list(path))


@pytest.fixture
def chain_defs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dg.Definitions:
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN_CONFIG)

    def no_network(*args, **kwargs):
        raise AssertionError("loading the definitions must not open a connection")

    with monkeypatch.context() as mp:
        mp.setattr(socket.socket, "connect", no_network)
        mp.setattr(socket, "create_connection", no_network)
        defs = build_definitions(path)
        defs.get_repository_def().asset_graph  # noqa: B018 - the property resolves it, here while the network is off
    return defs


def test_every_link_has_its_source_topics_upstream_of_its_copy(chain_defs) -> None:
    graph = chain_defs.get_repository_def().asset_graph
    for group in ("west_to_east", "east_to_eu", "eu_to_east"):
        source = graph.get(key(group, "source_topics"))
        assert source.is_observable and not source.is_materializable
        assert key(group, "source_topics") in graph.get(key(group, "mirror_data")).parent_keys
        assert (
            chain_defs.get_assets_def(key(group, "source_topics")).group_names_by_key[key(group, "source_topics")]
            == group
        )


def test_a_chain_of_links_is_one_connected_graph(chain_defs) -> None:
    graph = chain_defs.get_repository_def().asset_graph
    # The mirrors link 1 writes on us-east are sources of link 2.
    assert graph.get(key("east_to_eu", "source_topics")).parent_keys == {key("west_to_east", "mirror_data")}
    downstream, todo = set(), [key("west_to_east", "source_topics")]
    while todo:
        node = todo.pop()
        for child in graph.get(node).child_keys:
            if child not in downstream:
                downstream.add(child)
                todo.append(child)
    assert {
        key("west_to_east", "mirror_data"),
        key("east_to_eu", "source_topics"),
        key("east_to_eu", "mirror_data"),
        key("east_to_eu", "consumer_offsets"),
    } <= downstream
    # A failback pair (us-east <-> eu-west) is not joined: the graph would be a cycle.
    assert graph.get(key("eu_to_east", "source_topics")).parent_keys == set()
    assert key("eu_to_east", "mirror_data") not in graph.get(key("east_to_eu", "source_topics")).parent_keys


def test_links_in_a_ring_leave_out_the_edge_that_closes_it() -> None:
    ring = {"a-to-b": ("a", "b"), "b-to-c": ("b", "c"), "c-to-a": ("c", "a")}
    assert chain_upstreams(ring) == {"a-to-b": [], "b-to-c": ["a-to-b"], "c-to-a": ["b-to-c"]}
    pair = {"west-to-east": ("w", "e"), "east-to-west": ("e", "w")}
    assert chain_upstreams(pair) == {"west-to-east": [], "east-to-west": []}


def describe_answer(ends: dict[str, list[int]], unknown: set[str] = frozenset()):
    """`describe_mirror` answering the source's log ends per mirror (None for the source's figures of `unknown`)."""

    def describe(link, mirror):
        info = mirrors_answer([(mirror, "ACTIVE")])(link)[0]
        gone = mirror in unknown
        parts = tuple(
            PartitionStatus(p, None if gone else 0, None if gone else end, 0, end, end, 0, True, 0)
            for p, end in enumerate(ends.get(mirror, []))
        )
        return MirrorDescription(
            info,
            None if gone else len(parts),
            len(parts),
            parts,
            None,
            {},
            source_unknown="cluster 'us-west' did not answer" if gone else "",
        )

    return describe


def observe(defs: dg.Definitions, engine, instance) -> dg.ExecuteInProcessResult:
    asset = defs.get_assets_def(key("west_to_east", "source_topics"))
    job = dg.define_asset_job("observe_sources", selection=[key("west_to_east", "source_topics")])
    return (
        dg.Definitions(assets=[asset], jobs=[job], resources={"mirror_engine": engine})
        .resolve_job_def("observe_sources")
        .execute_in_process(instance=instance)
    )


def test_observing_records_the_log_end_offsets_per_partition(chain_defs, tmp_path: Path) -> None:
    config = tmp_path / "chain.yaml"
    engine = stub_engine(
        config,
        list_mirrors=mirrors_answer(
            [("orders", "ACTIVE"), ("payments", "PAUSED"), ("old", "STOPPED"), ("gone", "ACTIVE")]
        ),
        describe_mirror=describe_answer({"orders": [120, 80], "payments": [7], "old": [1]}, unknown={"gone"}),
    )
    with dg.instance_for_test() as instance:
        assert observe(chain_defs, engine, instance).success
        (record,) = instance.fetch_observations(key("west_to_east", "source_topics"), limit=5).records
        metadata = record.asset_observation.metadata

        assert metadata["log_end_offsets"].value == {"orders": {"0": 120, "1": 80}, "payments": {"0": 7}}
        assert metadata["log_end_total"].value == 207
        assert metadata["source_cluster"].value == "us-west"
        assert metadata["unknown"].value == {"gone": "cluster 'us-west' did not answer"}
        assert "| orders | orders | 1 | 0 | 80 |" in metadata["offsets"].value
        first = record.asset_observation.data_version

        # Nothing moved: same data version; a log end moved: another one.
        assert observe(chain_defs, engine, instance).success
        moved = stub_engine(
            config,
            list_mirrors=mirrors_answer([("orders", "ACTIVE")]),
            describe_mirror=describe_answer({"orders": [121, 80]}),
        )
        assert observe(chain_defs, moved, instance).success
        versions = [
            r.asset_observation.data_version
            for r in instance.fetch_observations(key("west_to_east", "source_topics"), limit=5).records
        ]
        assert versions[2] == first and versions[1] == first and versions[0] != first
