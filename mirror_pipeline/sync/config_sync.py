"""Config sync: mirrors follow their source topic's configs after creation (R-CS-1..5).

The verbs: a sync (`sync_topic_configs`) and the read-only drift checks
(`config_drift`, `config_drifts`). What a mirror gets is decided in
`config_plan` (pure), what the link remembers per mirror lives in
`config_records`, and the alters are made by `config_alter`.

Partition growth is left to the copy cycle; partition counts are reported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.config.redaction import scrub
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.topic_configs import describe_topic_configs, described_topics_configs
from mirror_pipeline.link import write_guard
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.partitions import grow_partitions, settled_partitions, source_partitions
from mirror_pipeline.model.errors import MirrorError, MirrorRefused
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import CONFIG_SYNCED_STATES
from mirror_pipeline.model.text import some_of
from mirror_pipeline.sync.config_alter import alter_configs, await_visible
from mirror_pipeline.sync.config_plan import (
    ConfigPlan,
    ConfigSyncFailed,
    ConfigSyncResult,
    MirrorConfigSync,
    lag_ms,
    last_synced,
    managed,
    plan_config_changes,
)
from mirror_pipeline.sync.config_records import (
    MAX_CHECKED_MIRRORS,
    config_sync_key,
    read_sync_records,
    str_map,
    unchanged_but_times,
    write_sync_records,
)

__all__ = [
    # defined here
    "config_drift",
    "config_drifts",
    "link_config_drift",
    "sync_configs",
    "sync_topic_configs",
    # re-exported: importable from here as before the split
    "ConfigPlan",
    "ConfigSyncFailed",
    "ConfigSyncResult",
    "MirrorConfigSync",
    "config_sync_key",
    "plan_config_changes",
    "read_sync_records",
]

log = logging.getLogger(__name__)


# --- engine-style entry points ----------------------------------------------------------------


def sync_configs(config: PipelineConfig, link: str, mirrors: Iterable[str] | None = None) -> ConfigSyncResult:
    """Sync the topic configs of `link`'s mirrors (all of them, or the named ones) from their sources."""
    return sync_topic_configs(LinkContext.open(config, link), None if mirrors is None else list(mirrors))


def link_config_drift(config: PipelineConfig, link: str, mirrors: Iterable[str] | None = None) -> dict[str, dict]:
    """Read-only: per mirror, what a config sync would change now (see `config_drifts`)."""
    return config_drifts(LinkContext.open(config, link), None if mirrors is None else list(mirrors))


# --- the verb ------------------------------------------------------------------------------


@dataclass
class _Checked:
    """One mirror, described and planned."""

    info: MirrorInfo
    record: dict
    source: dict[str, str]
    plan: ConfigPlan
    source_partitions: int
    mirror_partitions: int | None  # None: the destination did not list the mirror topic


def sync_topic_configs(ctx: LinkContext, mirror_topics: list[str] | None = None) -> ConfigSyncResult:
    """One config sync of the link's mirrors in `CONFIG_SYNCED_STATES` (or of those named among them).

    Raises `ClusterUnreachable` when either cluster does not answer, before
    changing anything; `ConfigSyncFailed` (a `MirrorError` carrying the result)
    at the end when some mirrors could not be synced, the others having been.
    Names that are not mirrors of the link are ignored.
    """
    started = time.time()
    ctx.check_destination()
    ctx.check_source()
    secrets = _secrets(ctx)
    selected, skipped = _select(ctx, mirror_topics)
    records = read_sync_records(ctx) if selected else {}

    checked, unchecked = _check_all(ctx, selected, records, grow=True)
    errors = {m: scrub(str(exc), secrets) for m, exc in unchecked.items()}

    to_change = {m: c for m, c in checked.items() if c.plan.changes}
    if to_change:
        # A mirror promoted or failed over since it was read must not get its
        # mirror-only settings back: look again just before altering.
        current = ctx.registry()
        for m in list(to_change):
            state = current[m].state if m in current else "deleted"
            if state not in CONFIG_SYNCED_STATES:
                skipped[m] = state
                del to_change[m], checked[m]
    if to_change:
        # Intent first: a sync that dies after altering must recognise its own values.
        write_sync_records(
            ctx,
            {
                m: {**c.record, "pending": {n: new for n, (_, new) in c.plan.changes.items()}}
                for m, c in to_change.items()
            },
        )
        errors.update(alter_configs(ctx, {m: c.plan.changes for m, c in to_change.items()}, secrets))
        await_visible(ctx, {m: c.plan.changes for m, c in to_change.items() if m not in errors})

    now = time.time()
    results: dict[str, MirrorConfigSync] = {}
    records_out: dict[str, dict] = {}
    in_sync: list[str] = []
    for m, c in checked.items():
        failed = m in errors
        last = last_synced(c.record, c.info)
        synced_at = last if failed else now
        results[m] = MirrorConfigSync(
            mirror_topic=m,
            source_topic=c.info.source_topic,
            state=c.info.state,
            changed={} if failed else dict(c.plan.changes),
            overridden=dict(c.plan.overridden),
            held_back=dict(c.plan.held_back),
            in_sync=not failed,
            synced_at=synced_at,
            config_sync_lag_ms=lag_ms(now, synced_at),
            source_partitions=c.source_partitions,
            mirror_partitions=c.mirror_partitions,
            error=errors.get(m),
        )
        if failed:
            # The alter did not land (a topic's configs change all or nothing).
            records_out[m] = {k: v for k, v in c.record.items() if k != "pending"}
        else:
            in_sync.append(m)
            records_out[m] = {
                "applied": c.plan.applied,
                "synced_at": now,
                "source": managed(c.source),
                "held_back": c.plan.held_back,
                "checked_at": now,
            }
    for info in selected:
        m = info.mirror_topic
        if m in errors and m not in results:  # failed before it could be planned
            last = last_synced(records.get(m, {}), info)
            results[m] = MirrorConfigSync(
                m,
                info.source_topic,
                info.state,
                synced_at=last,
                config_sync_lag_ms=lag_ms(now, last),
                error=errors[m],
            )
    if mirror_topics is None and len(in_sync) <= MAX_CHECKED_MIRRORS:
        # A sync of every mirror: the records that say only a later time are the checked record's.
        records_out = {m: r for m, r in records_out.items() if not unchanged_but_times(checked[m].record, r)}
        write_sync_records(ctx, records_out, (now, in_sync))
    elif records_out:
        write_sync_records(ctx, records_out)
    # Grants made since the last pass get their DENY; stopped mirrors lose their guard (R-ACL-3).
    in_scope = [
        i for i in ctx.store.read_mirrors().values() if mirror_topics is None or i.mirror_topic in mirror_topics
    ]
    for m, why in write_guard.refresh(ctx, in_scope).items():
        log.info("mirror '%s': read-only not enforced: %s", m, scrub(why, secrets))

    result = ConfigSyncResult(ctx.link.name, started, time.time() - started, results, skipped)
    if result.failed:
        detail = "; ".join(f"mirror '{m}': {why}" for m, why in result.failed.items())
        raise ConfigSyncFailed(
            f"config sync of link '{ctx.link.name}' failed for {len(result.failed)} mirror(s): {detail}", result
        )
    return result


def config_drift(ctx: LinkContext, mirror: str) -> dict:
    """Read-only: what a config sync would do to one mirror now, without doing it.

    {"mirror_topic", "source_topic", "state", "drift": {name: [mirror value, value it would get]},
     "overridden", "held_back", "in_sync", "last_synced_at", "config_sync_lag_ms",
     "source_partitions", "mirror_partitions"}; for a mirror in a state outside
    `CONFIG_SYNCED_STATES`, {"mirror_topic", "source_topic", "state", "drift": {}, "in_sync": None, "note"}.
    Refuses (MirrorRefused) a name that is not a mirror of the link.
    """
    ctx.check_destination()
    registry = ctx.registry()
    if mirror not in registry:
        raise MirrorRefused(f"no mirror '{mirror}' on link '{ctx.link.name}' (mirrors: {some_of(sorted(registry))})")
    info = registry[mirror]
    if info.state not in CONFIG_SYNCED_STATES:
        return {
            "mirror_topic": mirror,
            "source_topic": info.source_topic,
            "state": info.state,
            "drift": {},
            "in_sync": None,
            "note": f"configs are synced only while the mirror is ACTIVE or PAUSED; it is {info.state}",
        }
    ctx.check_source()
    record = read_sync_records(ctx).get(mirror, {})
    return _drift(_check(ctx, info, record), time.time())


def config_drifts(ctx: LinkContext, mirror_topics: list[str] | None = None) -> dict[str, dict]:
    """`config_drift` of every mirror in `CONFIG_SYNCED_STATES` (or of those named among them).

    A mirror that cannot be described gets {"error": ..., "in_sync": False}.
    Raises `ClusterUnreachable` when either cluster does not answer.
    """
    ctx.check_destination()
    ctx.check_source()
    secrets = _secrets(ctx)
    selected, _skipped = _select(ctx, mirror_topics)
    records = read_sync_records(ctx) if selected else {}
    checked, unchecked = _check_all(ctx, selected, records)
    now = time.time()
    out: dict[str, dict] = {}
    for info in selected:
        if info.mirror_topic in checked:
            out[info.mirror_topic] = _drift(checked[info.mirror_topic], now)
        else:
            exc = unchecked[info.mirror_topic]
            last = last_synced(records.get(info.mirror_topic, {}), info)
            out[info.mirror_topic] = {
                "mirror_topic": info.mirror_topic,
                "source_topic": info.source_topic,
                "state": info.state,
                "in_sync": False,
                "last_synced_at": last,
                "config_sync_lag_ms": lag_ms(now, last),
                "error": scrub(str(exc), secrets),
            }
    return out


# --- helpers --------------------------------------------------------------------------------


def _select(ctx: LinkContext, mirror_topics: list[str] | None) -> tuple[list[MirrorInfo], dict[str, str]]:
    registry = ctx.registry()
    wanted = sorted(registry) if mirror_topics is None else [m for m in dict.fromkeys(mirror_topics) if m in registry]
    selected = [registry[m] for m in wanted if registry[m].state in CONFIG_SYNCED_STATES]
    skipped = {m: registry[m].state for m in wanted if registry[m].state not in CONFIG_SYNCED_STATES}
    return selected, skipped


def _check_all(
    ctx: LinkContext, infos: list[MirrorInfo], records: dict[str, dict], grow: bool = False
) -> tuple[dict[str, _Checked], dict[str, MirrorError]]:
    """`_check` of every mirror of `infos`: (the checked mirrors, the others' errors), by mirror topic.

    The partition counts come from one metadata request per cluster and the
    configs from one describe-configs request per cluster: asked mirror by
    mirror, four requests each, a sync of 1,000 mirrors took 5-6 s, and
    `link sync-configs` checks twice (the sync, then the record's check). A
    mirror whose partition counts differ (to grow) or whose topics are not in
    the answers (gone, not allowed) is checked on its own, which says why.
    """
    settled = settled_partitions(ctx, infos)
    together = [i for i in infos if i.mirror_topic in settled]
    source = described_topics_configs(ctx.source_admin, [i.source_topic for i in together])
    mirror = described_topics_configs(ctx.dest_admin, [i.mirror_topic for i in together])
    checked: dict[str, _Checked] = {}
    errors: dict[str, MirrorError] = {}
    for info in infos:
        record = records.get(info.mirror_topic, {})
        if info.source_topic in source and info.mirror_topic in mirror:
            parts = settled[info.mirror_topic]
            checked[info.mirror_topic] = _planned(
                info, record, source[info.source_topic], mirror[info.mirror_topic], parts, parts
            )
            continue
        try:
            checked[info.mirror_topic] = _check(ctx, info, record, grow)
        except MirrorError as exc:
            errors[info.mirror_topic] = exc
    return checked, errors


def _check(ctx: LinkContext, info: MirrorInfo, record: dict, grow: bool = False) -> _Checked:
    """The mirror's configs against the source's; only a sync (`grow`) changes anything.

    Partition count is always synced (R-CS-1), growing being the only change
    Kafka allows; a drift check (describe, the asset check) only reads it.
    """
    src_parts = grow_partitions(ctx, info)[0] if grow else source_partitions(ctx, info)
    dst_parts = kc.topic_partitions(ctx.dest_admin, info.mirror_topic, ctx.dest.alias)
    source = describe_topic_configs(ctx.source_admin, info.source_topic, ctx.source.alias)
    mirror = describe_topic_configs(ctx.dest_admin, info.mirror_topic, ctx.dest.alias)
    return _planned(info, record, source, mirror, src_parts, dst_parts)


def _planned(
    info: MirrorInfo,
    record: dict,
    source: dict[str, str],
    mirror: dict[str, str],
    src_parts: int,
    dst_parts: int | None,
) -> _Checked:
    plan = plan_config_changes(source, mirror, str_map(record.get("applied")), str_map(record.get("pending")))
    return _Checked(info, record, source, plan, src_parts, dst_parts)


def _drift(c: _Checked, now: float) -> dict:
    last = last_synced(c.record, c.info)
    return {
        "mirror_topic": c.info.mirror_topic,
        "source_topic": c.info.source_topic,
        "state": c.info.state,
        "drift": {k: list(v) for k, v in sorted(c.plan.changes.items())},
        "overridden": dict(sorted(c.plan.overridden.items())),
        "held_back": dict(sorted(c.plan.held_back.items())),
        "in_sync": c.plan.in_sync,
        "last_synced_at": last,
        "config_sync_lag_ms": 0 if c.plan.in_sync else lag_ms(now, last),
        "source_partitions": c.source_partitions,
        "mirror_partitions": c.mirror_partitions,
    }


def _secrets(ctx: LinkContext) -> list[str]:
    return kc.secrets_of(ctx.source_conf("admin")) + kc.secrets_of(ctx.dest_conf("admin"))
