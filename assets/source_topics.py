"""The source topics of each link as an observable source asset, upstream of its `mirror_data`.

- Asset `[<link>, "source_topics"]` (not partitioned): the topics on the
  link's source cluster that its mirrors (every one not STOPPED) read.
  Observing it (Observe in the UI, a run of `__ASSET_JOB`) reads each one's
  log start and end offsets per partition through the engine resource, and
  records them as metadata, with a data version that changes when any log end
  moves, so the UI can tell when the mirrors are behind their sources.
  Loading the definitions reads only the config file; Kafka is asked only when
  the asset is observed.
- Chains draw as one graph: when link B reads from the cluster link A writes
  to, A's `mirror_data` is upstream of B's `source_topics` (A's mirrors are
  among B's sources: us-west -> us-east -> eu-west is one line of assets).
  Dagster's asset graph must be acyclic, so two links between the same two
  clusters in opposite directions (a failback pair) are not joined, and in any
  other ring the edge that would close it is left out (edges are considered in
  name order).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence

from dagster import (
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    BetaWarning,
    DataVersion,
    Definitions,
    Failure,
    MetadataValue,
    ObserveResult,
    multi_observable_source_asset,
)

from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError
from mirror_pipeline.model.states import STOPPED
from mirror_pipeline_dagster.naming import LinkNames


def source_topics_definitions(config: PipelineConfig) -> Definitions:
    """One source asset per link of `config`, chained to the links that write its source cluster. No I/O."""
    ends = {name: (config.link(name).source, config.link(name).destination) for name in config.links}
    upstream = chain_upstreams(ends)
    return Definitions(
        assets=[
            build_source_topics_asset(
                LinkNames(name), ends[name][0], [LinkNames(up).mirror_data_key for up in upstream[name]]
            )
            for name in sorted(ends)
        ]
    )


def chain_upstreams(links: Mapping[str, tuple[str, str]]) -> dict[str, list[str]]:
    """Per link (name -> (source, destination)), the links whose destination is its source, kept acyclic."""
    candidates = sorted(
        (up, down)
        for up, (up_source, up_dest) in links.items()
        for down, (down_source, down_dest) in links.items()
        if up != down and up_dest == down_source and not (up_source == down_dest)  # not a failback pair
    )
    kept: dict[str, list[str]] = {name: [] for name in links}
    for up, down in candidates:
        if not _reaches(kept, down, up):  # else up -> down would close a ring
            kept[down].append(up)
    return kept


def _reaches(upstream: Mapping[str, list[str]], start: str, target: str) -> bool:
    """Whether `target` is downstream of `start` (`upstream` maps each link to its upstream links)."""
    downstream: dict[str, list[str]] = {}
    for down, ups in upstream.items():
        for up in ups:
            downstream.setdefault(up, []).append(down)
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == target:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(downstream.get(node, []))
    return False


def build_source_topics_asset(
    names: LinkNames, source_cluster: str, upstream: Sequence[AssetKey] = ()
) -> AssetsDefinition:
    with warnings.catch_warnings():
        # Observable source assets are beta in Dagster 1.13: the warning is noise at every load.
        warnings.simplefilter("ignore", BetaWarning)
        return _source_topics_asset(names, source_cluster, list(upstream))


def _source_topics_asset(names: LinkNames, source_cluster: str, upstream: list[AssetKey]) -> AssetsDefinition:
    spec = AssetSpec(
        names.source_topics_key,
        group_name=names.group,
        deps=upstream,
        kinds={"kafka"},
        description=(
            f"The topics on cluster '{source_cluster}' that the mirrors of link '{names.link}' read. "
            "Observe to record each one's log start and end offsets per partition."
        ),
    )

    @multi_observable_source_asset(
        specs=[spec],
        name=names.observe_sources_op,
        required_resource_keys={"mirror_engine"},
        description=f"Reads the log offsets of the source topics of link '{names.link}'.",
    )
    def _observe(context):
        engine = context.resources.mirror_engine
        link = engine.link(names.link)  # fails clearly if the link left the file since load
        offsets, unknown = read_source_offsets(engine, names.link)
        context.log.info(
            f"link {names.link}: {len(offsets)} source topic(s) on '{link.source}' observed"
            + (f"; unknown: {', '.join(sorted(unknown))}" if unknown else "")
        )
        yield ObserveResult(
            asset_key=names.source_topics_key,
            metadata=observation_metadata(link.source, offsets, unknown),
            data_version=DataVersion(_version(offsets)),
        )

    return _observe


def read_source_offsets(engine, link: str) -> tuple[dict[str, dict], dict[str, str]]:
    """`({source topic: {"mirror": m, "partitions": {p: [start, end]}}}, {source topic: why unknown})`."""
    try:
        mirrors = [m for m in engine.list_mirrors(link) if m.state != STOPPED]
    except MirrorError as exc:
        raise Failure(description=str(exc)) from exc
    offsets: dict[str, dict] = {}
    unknown: dict[str, str] = {}
    for m in sorted(mirrors, key=lambda m: m.source_topic):
        try:
            described = engine.describe_mirror(link, m.mirror_topic)
        except ClusterUnreachable as exc:  # the destination (the link's registry) is down: nothing to tell
            raise Failure(description=str(exc)) from exc
        except MirrorError as exc:  # e.g. deleted meanwhile: the others are still observed
            unknown[m.source_topic] = str(exc)
            continue
        if described.source_unknown:
            unknown[m.source_topic] = described.source_unknown
            continue
        offsets[m.source_topic] = {
            "mirror": m.mirror_topic,
            "partitions": {
                p.partition: [p.source_log_start, p.source_log_end]
                for p in described.partitions
                if p.source_log_end is not None
            },
        }
    return offsets, unknown


def observation_metadata(source_cluster: str, offsets: dict[str, dict], unknown: dict[str, str]) -> dict:
    """Per source topic and partition, the log start and end offsets; never a secret (names and figures)."""
    ends = {t: {str(p): se[1] for p, se in sorted(o["partitions"].items())} for t, o in sorted(offsets.items())}
    metadata = {
        "source_cluster": MetadataValue.text(source_cluster),
        "topics": MetadataValue.int(len(offsets)),
        # Plotted over observations: the sources' growth.
        "log_end_total": MetadataValue.int(sum(end for parts in ends.values() for end in parts.values())),
        "log_end_offsets": MetadataValue.json(ends),
        "offsets": MetadataValue.md(_offsets_table(offsets)),
    }
    if unknown:
        metadata["unknown"] = MetadataValue.json(dict(sorted(unknown.items())))
    return metadata


def _offsets_table(offsets: dict[str, dict]) -> str:
    if not offsets:
        return "the link has no mirror reading a source topic"
    rows = ["| source topic | mirror topic | partition | log start | log end |", "| --- | --- | ---: | ---: | ---: |"]
    for topic, o in sorted(offsets.items()):
        for p, (start, end) in sorted(o["partitions"].items()):
            rows.append(f"| {topic} | {o['mirror']} | {p} | {start} | {end} |")
    return "\n".join(rows)


def _version(offsets: dict[str, dict]) -> str:
    """Changes when a log end moves (or a topic comes or goes)."""
    ends = {t: sorted((p, se[1]) for p, se in o["partitions"].items()) for t, o in offsets.items()}
    return hashlib.sha256(json.dumps(ends, sort_keys=True).encode()).hexdigest()[:16]
