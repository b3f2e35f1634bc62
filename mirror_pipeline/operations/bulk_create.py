"""Many mirrors created at once: auto-create's scan on a wide source (R-AC-1, R-MT-1..3).

`mirrors.create_mirror` makes one mirror with about a dozen requests and two
state changes; auto-create on a source of 1,000 topics paid that 1,000 times.
Here each of those questions is asked once for every topic (partition
counts, configs, end offsets, whether the link may READ them, the cluster
id), the mirrors are registered in one state change and their topics
created in one request. The order of `create_mirror` is kept for each
mirror: every check passes before anything is written, the registration
comes before the topic, a topic whose creation fails is unregistered. A
topic the batch cannot decide alone (already registered, the link's
heartbeats, a lookup that failed for some topic of the batch) goes through
`create_mirror`, which says exactly why.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.controller_requests import creation_records, initial_partitions, request_batches
from mirror_pipeline.kafka.topic_configs import describe_topics_configs, split_for_mirror
from mirror_pipeline.link import read_probe, write_guard
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError, MirrorRefused
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.operations.mirrors import check_names, create_mirror, grow_new_mirror, new_mirror_info

Outcome = tuple[MirrorInfo, bool] | MirrorError
# Topics asked of the destination per CreateTopics request: each must complete within the
# request timeout, and a controller creates thousands of partitions in seconds, not at once
# (a request also writes at most `controller_requests.RECORDS_PER_REQUEST` metadata records).
CREATE_TOPICS_AT_ONCE = 100
# A CreateTopics answer that does not say the topic was refused: the client gave up waiting.
_UNANSWERED = frozenset({KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT})


def create_mirrors(ctx: LinkContext, wanted: Sequence[tuple[str, str]]) -> dict[str, Outcome]:
    """Create a mirror for each (source topic, mirror topic); by source topic, (info, created?)
    or the error that refused it. One refused topic never stops the others."""
    if not wanted:
        return {}
    ctx.check_destination()
    ctx.check_source()
    registry = ctx.registry()
    source_counts = kc.partition_counts(ctx.source_admin, ctx.source.alias)
    dest_counts = kc.partition_counts(ctx.dest_admin, ctx.dest.alias)
    heartbeats = ctx.naming.internal_topic("heartbeats") if ctx.link.heartbeats_enabled else None
    out: dict[str, Outcome] = {}
    batch: list[tuple[str, str]] = []
    alone: list[tuple[str, str]] = []
    for source, mirror in wanted:
        if source == heartbeats or mirror in registry or mirror in dest_counts or source not in source_counts:
            alone.append((source, mirror))
            continue
        try:
            check_names(ctx, source, mirror)
        except MirrorError as exc:
            out[source] = exc
            continue
        batch.append((source, mirror))
    try:
        configs = describe_topics_configs(ctx.source_admin, [s for s, _ in batch], ctx.source.alias)
        kc.list_offsets(
            ctx.source_admin, [(s, p) for s, _ in batch for p in range(source_counts[s])], "latest", ctx.source.alias
        )
    except MirrorError:  # some topic cannot be read: each one alone says which, and why
        alone += batch
        batch = []
    # The lookups above need only DESCRIBE: one Fetch per topic, from one consumer, shows READ.
    refused = read_probe.refusals(ctx, [s for s, _ in batch])
    out.update(refused)
    batch = [(s, m) for s, m in batch if s not in refused]
    if batch:
        out.update(_create_checked(ctx, batch, source_counts, configs))
    for source, mirror in alone:
        try:
            out[source] = create_mirror(ctx, source, mirror)
        except MirrorError as exc:
            out[source] = exc
    return out


def _create_checked(
    ctx: LinkContext, batch: list[tuple[str, str]], partitions: dict[str, int], configs: dict[str, dict[str, str]]
) -> dict[str, Outcome]:
    """Register, create and guard mirrors whose checks all passed (see the module)."""
    cluster_id = kc.cluster_id(ctx.source_admin, ctx.source.alias)
    split = {source: split_for_mirror(configs[source]) for source, _ in batch}
    infos = {mirror: new_mirror_info(ctx, source, mirror, split[source][1], cluster_id) for source, mirror in batch}
    ctx.store.ensure_topics()
    ctx.record_naming()
    # A mirror registered meanwhile (another scan) keeps its registration; its topic is created below anyway.
    ctx.store.update_mirrors(lambda current: [(m, info) for m, info in infos.items() if m not in current])
    failed: dict[str, MirrorError] = {}
    unanswered: set[str] = set()  # the request timed out: the controller may have created the topic all the same
    first = {source: initial_partitions(partitions[source], len(split[source][0])) for source, _ in batch}
    for requested in request_batches(
        batch, lambda sm: creation_records(first[sm[0]], len(split[sm[0]][0])), at_most=CREATE_TOPICS_AT_ONCE
    ):
        futures = ctx.dest_admin.create_topics(
            [
                NewTopic(mirror, num_partitions=first[source], replication_factor=-1, config=split[source][0])
                for source, mirror in requested
            ],
            request_timeout=kc.REQUEST_TIMEOUT_S,
        )
        for mirror, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                failed[mirror] = MirrorRefused(
                    f"cluster '{ctx.dest.alias}': creating mirror topic '{mirror}' failed: {kc.error_name(exc)}"
                )
                if kc.is_retriable(exc) or kc.error_code(exc) in _UNANSWERED:
                    unanswered.add(mirror)
        for source, mirror in requested:
            if mirror not in failed and first[source] < partitions[source]:
                grow_new_mirror(ctx, mirror, first[source], partitions[source])
    # What each topic should be listed with: all its partitions, or those it was asked to be created
    # with where the answer was lost (a wide one is then grown by the next cycle's planner).
    expected = {mirror: first[source] if mirror in unanswered else partitions[source] for source, mirror in batch}
    _wait_until_listed(ctx, {m: n for m, n in expected.items() if m not in failed or m in unanswered})
    if unanswered:
        # Created after all (listed with the partitions asked for): the mirror keeps its registration.
        # Unregistered, its topic would block every later scan ("already exists") until deleted by hand.
        listed = kc.partition_counts(ctx.dest_admin, ctx.dest.alias)
        for mirror in unanswered:
            if listed.get(mirror) == expected[mirror]:
                del failed[mirror]
    if failed:  # unregister what the failed creates registered
        ctx.store.update_mirrors(lambda current: [(m, None) for m in failed if m in current])
    guarded = write_guard.guard_all(ctx, [m for m in infos if m not in failed])
    return {
        source: failed[mirror] if mirror in failed else (guarded.get(mirror) or infos[mirror], True)
        for source, mirror in batch
    }


def _wait_until_listed(ctx: LinkContext, created: dict[str, int]) -> None:
    """Until the destination's metadata shows every created topic with its partitions (or the
    request timeout passes): a broker learns of new topics from the controller a moment after
    they are created, and a cycle planned at once took a thousand new mirrors for missing ones."""
    deadline = time.monotonic() + kc.REQUEST_TIMEOUT_S
    while created and time.monotonic() < deadline:
        listed = kc.partition_counts(ctx.dest_admin, ctx.dest.alias)
        created = {m: n for m, n in created.items() if listed.get(m) != n}
        if created:
            time.sleep(0.2)
