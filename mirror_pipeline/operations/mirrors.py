"""Mirror topic verbs: create, list, describe (R-MT-1..3, R-OBS-5)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka.admin import NewTopic

from mirror_pipeline.config.replication_policy import is_internal_topic
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.controller_requests import add_partitions, initial_partitions
from mirror_pipeline.kafka.topic_configs import describe_topic_configs, split_for_mirror
from mirror_pipeline.link import read_probe, write_guard
from mirror_pipeline.link.context import READ_ONLY_PROBE_S, LinkContext
from mirror_pipeline.model.errors import MirrorError, MirrorRefused, TopicNotFound
from mirror_pipeline.model.lag import records_behind
from mirror_pipeline.model.offset_map import resolve_keyed
from mirror_pipeline.model.results import MirrorDescription, MirrorInfo, PartitionStatus
from mirror_pipeline.model.states import ACTIVE, STOPPED
from mirror_pipeline.sync.config_sync import config_drift

log = logging.getLogger(__name__)
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def create_mirror(ctx: LinkContext, source_topic: str, mirror_topic: str | None = None) -> tuple[MirrorInfo, bool]:
    """Create a mirror of `source_topic` on the link's destination; (info, created?).

    Running it again for the same source and mirror is a no-op that reports the
    existing mirror. Every refusal happens before anything is written. The
    link's own heartbeats topic, the one internal topic a link mirrors, gets
    its fixed name (`heartbeats_mirror_topic`).
    """
    link = ctx.link
    heartbeats = link.heartbeats_enabled and source_topic == ctx.naming.internal_topic("heartbeats")
    mirror_topic = mirror_topic or (
        ctx.naming.heartbeats_mirror_topic() if heartbeats else ctx.naming.mirror_topic(source_topic)
    )
    check_names(ctx, source_topic, mirror_topic, heartbeats)
    ctx.check_destination()
    ctx.check_source()

    registry = ctx.registry()
    existing = registry.get(mirror_topic)
    if existing is not None:
        if existing.source_topic != source_topic:
            raise MirrorRefused(
                f"'{mirror_topic}' is already a mirror of '{existing.source_topic}' on link '{link.name}'"
            )
        if kc.topic_partitions(ctx.dest_admin, mirror_topic, ctx.dest.alias) is not None:
            return existing, False
        # Registered but the topic is missing: an earlier create stopped half-way.
    partitions = kc.topic_partitions(ctx.source_admin, source_topic, ctx.source.alias)
    if partitions is None:
        raise TopicNotFound(f"source topic '{source_topic}' does not exist on cluster '{ctx.source.alias}'")
    try:
        source_configs = describe_topic_configs(ctx.source_admin, source_topic, ctx.source.alias)
        kc.list_offsets(ctx.source_admin, [(source_topic, p) for p in range(partitions)], "latest", ctx.source.alias)
    except Exception as exc:
        raise MirrorRefused(
            f"source topic '{source_topic}' on cluster '{ctx.source.alias}' cannot be read "
            f"with the link's credentials: {exc}"
        ) from None
    # The checks above need only DESCRIBE: a Fetch shows the link may also READ it.
    refused = read_probe.refusals(ctx, [source_topic])
    if refused:
        raise refused[source_topic]
    if existing is None and kc.topic_partitions(ctx.dest_admin, mirror_topic, ctx.dest.alias) is not None:
        raise MirrorRefused(
            f"a topic named '{mirror_topic}' already exists on cluster '{ctx.dest.alias}'; "
            f"a normal topic is never turned into a mirror"
        )

    configs, held = split_for_mirror(source_configs)
    info = existing or new_mirror_info(
        ctx, source_topic, mirror_topic, held, kc.cluster_id(ctx.source_admin, ctx.source.alias)
    )
    # Nothing is written before every check above passed: the internal topics
    # and the link's naming record come first, then the registration (a topic
    # that exists unregistered could never be claimed again), then the topic.
    ctx.store.ensure_topics()
    ctx.record_naming()
    ctx.store.put_mirror(info)
    first = initial_partitions(partitions, len(configs))
    try:
        with kc.kafka_errors(
            f"cluster '{ctx.dest.alias}': creating mirror topic '{mirror_topic}' failed", MirrorRefused
        ):
            ctx.dest_admin.create_topics(
                [NewTopic(mirror_topic, num_partitions=first, replication_factor=-1, config=configs)],
                request_timeout=kc.REQUEST_TIMEOUT_S,
            )[mirror_topic].result()
    except MirrorRefused:
        if existing is None:
            ctx.store.delete_mirror(mirror_topic)  # unregister what the failed create registered
        raise
    if first < partitions:
        grow_new_mirror(ctx, mirror_topic, first, partitions)
    # Read-only from its first record on, where the destination's authorizer allows (R-ACL-3).
    return write_guard.guard(ctx, mirror_topic) or info, True


def grow_new_mirror(ctx: LinkContext, mirror_topic: str, created: int, partitions: int) -> None:
    """Give a mirror topic created with fewer partitions than its source (a topic too wide for one
    request, `controller_requests`) the rest. A failure leaves the topic as it is, registered: the next
    cycle's planner adds what is missing (R-MT-10), while unregistering it would leave a topic no
    later create could claim."""
    try:
        add_partitions(
            ctx.dest_admin,
            mirror_topic,
            created,
            partitions,
            f"cluster '{ctx.dest.alias}': adding partitions to new mirror topic '{mirror_topic}' failed",
        )
    except MirrorError as exc:
        log.warning("%s; the next cycle adds them", exc)


def check_names(ctx: LinkContext, source_topic: str, mirror_topic: str, heartbeats: bool = False) -> None:
    """Refuse names Kafka or the link's policy would not take (nothing is asked of a cluster)."""
    for name, what in ((source_topic, "source topic"), (mirror_topic, "mirror topic")):
        if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise MirrorRefused(f"{what} name '{name}' is not a legal Kafka topic name")
    if heartbeats:
        if mirror_topic != ctx.naming.heartbeats_mirror_topic():
            raise MirrorRefused(
                f"the heartbeats of link '{ctx.link.name}' are mirrored as "
                f"'{ctx.naming.heartbeats_mirror_topic()}'; '{mirror_topic}' cannot be chosen"
            )
        return
    try:
        ctx.naming.check_mirror_name(source_topic, mirror_topic)
    except Exception as exc:
        raise MirrorRefused(str(exc)) from None
    if is_internal_topic(source_topic):
        raise MirrorRefused(f"'{source_topic}' is an internal topic and is never mirrored")


def new_mirror_info(
    ctx: LinkContext, source_topic: str, mirror_topic: str, held_back: dict, source_cluster_id: str
) -> MirrorInfo:
    """The registration of a mirror being created (ACTIVE from the start)."""
    now = time.time()
    return MirrorInfo(
        ctx.link.name,
        mirror_topic,
        source_topic,
        ACTIVE,
        now,
        "created",
        now,
        held_back=held_back,
        history=((now, "", ACTIVE, "created"),),
        source_cluster=ctx.source.alias,
        source_cluster_id=source_cluster_id,
    )


def list_mirrors(ctx: LinkContext) -> list[MirrorInfo]:
    ctx.check_destination(READ_ONLY_PROBE_S)
    return sorted(ctx.registry().values(), key=lambda m: m.mirror_topic)


def get_mirror(ctx: LinkContext, mirror_topic: str) -> MirrorInfo:
    mirrors = ctx.registry()
    if mirror_topic not in mirrors:
        known = ", ".join(sorted(mirrors)) or "none"
        raise MirrorRefused(f"no mirror '{mirror_topic}' on link '{ctx.link.name}' (mirrors: {known})")
    return mirrors[mirror_topic]


def describe_mirror(ctx: LinkContext, mirror_topic: str) -> MirrorDescription:
    """The mirror per partition. When its source cluster does not answer or its source
    topic is gone, the source's figures are None and `source_unknown` says why."""
    ctx.check_destination(READ_ONLY_PROBE_S)
    info = get_mirror(ctx, mirror_topic)
    dst_parts = kc.topic_partitions(ctx.dest_admin, mirror_topic, ctx.dest.alias) or 0
    dst_tps = [(mirror_topic, p) for p in range(dst_parts)]
    dst_start = kc.list_offsets(ctx.dest_admin, dst_tps, "earliest", ctx.dest.alias, read_committed=False)
    dst_end = kc.list_offsets(ctx.dest_admin, dst_tps, "latest", ctx.dest.alias, read_committed=False)
    segments = ctx.store.read_segments([mirror_topic]).segments
    source, unknown = _read_source(ctx, info)
    src_parts = len(source["start"]) if source else None
    rows = []
    for p in range(max(dst_parts, src_parts or 0)):
        leo = dst_end.get((mirror_topic, p), 0)
        res = resolve_keyed(segments.get((mirror_topic, p), []), leo)
        start = source["start"].get(p) if source else None
        end = source["end"].get(p) if source else None
        next_source = res.offset_map.next_source_offset
        next_source = start if next_source is None else next_source
        rows.append(
            PartitionStatus(
                partition=p,
                source_log_start=start,
                source_log_end=end,
                mirror_log_start=dst_start.get((mirror_topic, p), 0),
                mirror_log_end=leo,
                next_source_offset=next_source,
                lag=None if end is None or next_source is None else records_behind(end, next_source),
                offsets_preserved=res.offset_map.offsets_preserved,
                offset_map_runs=len(res.offset_map.runs),
            )
        )
    return MirrorDescription(
        mirror=info,
        source_partitions=src_parts,
        mirror_partitions=dst_parts,
        partitions=tuple(rows),
        source_timestamp_type=source["configs"].get("message.timestamp.type", "CreateTime") if source else None,
        held_back_configs=split_for_mirror(source["configs"])[1] if source else dict(info.held_back),
        config=config_drift(ctx, mirror_topic) if source and dst_parts else {},
        source_unknown=unknown,
        read_only=write_guard.describe_guard(info),
    )


def _read_source(ctx: LinkContext, info: MirrorInfo) -> tuple[dict | None, str]:
    """The source topic's log starts, ends and configs, or None and why they are unknown."""
    alias, topic = ctx.source.alias, info.source_topic
    try:
        kc.check_reachable(ctx.source_admin, alias, ctx.source.bootstrap_servers, timeout=READ_ONLY_PROBE_S)
        parts = kc.topic_partitions(ctx.source_admin, topic, alias, timeout=READ_ONLY_PROBE_S)
        if parts is None:
            return None, f"source topic '{topic}' no longer exists on cluster '{alias}'"
        tps = [(topic, p) for p in range(parts)]
        start = kc.list_offsets(ctx.source_admin, tps, "earliest", alias)
        end = kc.list_offsets(ctx.source_admin, tps, "latest", alias)
        configs = describe_topic_configs(ctx.source_admin, topic, alias)
    except MirrorError as exc:
        return None, str(exc)
    return {
        "start": {p: o for (_, p), o in start.items()},
        "end": {p: o for (_, p), o in end.items()},
        "configs": configs,
    }, ""


def partition_progress(ctx: LinkContext, info: MirrorInfo, with_source: bool = True):
    """Per partition: (partition, next source offset to mirror, source end or None)."""
    parts = kc.topic_partitions(ctx.dest_admin, info.mirror_topic, ctx.dest.alias) or 0
    ends = kc.list_offsets(
        ctx.dest_admin, [(info.mirror_topic, p) for p in range(parts)], "latest", ctx.dest.alias, read_committed=False
    )
    src_end: dict = {}
    if with_source:
        src_parts = kc.topic_partitions(ctx.source_admin, info.source_topic, ctx.source.alias) or 0
        src_end = kc.list_offsets(
            ctx.source_admin, [(info.source_topic, p) for p in range(src_parts)], "latest", ctx.source.alias
        )
    segments = ctx.store.read_segments([info.mirror_topic]).segments
    for p in range(parts):
        omap = resolve_keyed(segments.get((info.mirror_topic, p), []), ends[(info.mirror_topic, p)]).offset_map
        yield p, omap.next_source_offset or 0, src_end.get((info.source_topic, p)) if with_source else None


def link_lags(ctx: LinkContext) -> dict[str, int]:
    """Source records not yet mirrored, per mirror of the link, in one pass.

    One read of the offset-map topic and one offsets request per cluster,
    whatever the number of mirrors: the lag sensor asks this every tick. A
    mirror whose source topic is gone has no lag to tell and is left out (the
    health sensor fails it); the others are still answered.
    """
    ctx.check_destination()
    return _lags(ctx, ctx.registry().values())


def link_overview(
    ctx: LinkContext, measured: Mapping[str, int] | None = None
) -> tuple[list[MirrorInfo], dict[str, int]]:
    """Every mirror of the link (as `list_mirrors`) and their lags (as `link_lags`), from one read of the registry.

    `measured`: lags a cycle measured at its end (`CycleResult.measured_lags`), taken as they are; only the
    other mirrors' are read. On 10,000 partitions the read is three offset listings and the offset map, about
    1.9 s of a CLI cycle that copied every partition, for figures the cycle had just measured.
    """
    ctx.check_destination()
    infos = sorted(ctx.registry().values(), key=lambda m: m.mirror_topic)
    known = measured or {}
    read = _lags(ctx, [m for m in infos if m.mirror_topic not in known])
    lags: dict[str, int] = {}
    for m in infos:  # in the registry's order, as `_lags` answers
        if m.mirror_topic in read:
            lags[m.mirror_topic] = read[m.mirror_topic]
        elif m.mirror_topic in known and m.state != STOPPED:  # stopped since the cycle: no lag, as `_lags`
            lags[m.mirror_topic] = known[m.mirror_topic]
    return infos, lags


def _lags(ctx: LinkContext, infos) -> dict[str, int]:
    mirrors = [m for m in infos if m.state != STOPPED]
    if not mirrors:
        return {}
    ctx.check_source()
    # The reads are independent: side by side (on 10,000 partitions each offsets request takes about a second).
    with ThreadPoolExecutor(4, thread_name_prefix="mirror-lags") as pool:
        asked_dest_topics = pool.submit(kc.partition_counts, ctx.dest_admin, ctx.dest.alias)
        asked_segments = pool.submit(ctx.store.read_segments, [m.mirror_topic for m in mirrors])
        source_topics = kc.partition_counts(ctx.source_admin, ctx.source.alias)
        mirrors = [m for m in mirrors if m.source_topic in source_topics]
        dest_topics = asked_dest_topics.result()
        parts = {
            m.mirror_topic: min(dest_topics.get(m.mirror_topic, 0), source_topics[m.source_topic]) for m in mirrors
        }
        src_tps = [(m.source_topic, p) for m in mirrors for p in range(parts[m.mirror_topic])]
        dst_tps = [(m.mirror_topic, p) for m in mirrors for p in range(parts[m.mirror_topic])]
        asked_src_start = pool.submit(kc.list_offsets, ctx.source_admin, src_tps, "earliest", ctx.source.alias)
        asked_src_end = pool.submit(kc.list_offsets, ctx.source_admin, src_tps, "latest", ctx.source.alias)
        dst_end = kc.list_offsets(ctx.dest_admin, dst_tps, "latest", ctx.dest.alias, read_committed=False)
        src_start, src_end = asked_src_start.result(), asked_src_end.result()
        segments = asked_segments.result().segments
    lags: dict[str, int] = {}
    for m in mirrors:
        total = 0
        for p in range(parts[m.mirror_topic]):
            omap = resolve_keyed(segments.get((m.mirror_topic, p), []), dst_end[(m.mirror_topic, p)]).offset_map
            start = src_start[(m.source_topic, p)]
            next_source = start if omap.next_source_offset is None else max(start, omap.next_source_offset)
            total += records_behind(src_end[(m.source_topic, p)], next_source)
        lags[m.mirror_topic] = total
    return lags
