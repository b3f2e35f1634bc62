"""Config sync: mirrors follow their source topic's configs after creation (R-CS-1..5).

Which configs a mirror takes is decided by `topic_configs` (the same lists and
the same `split_for_mirror` that `create_mirror` uses):

- R-CS-1 always synced: the mirror gets the source's value, whether the source
  set it or has it at its default;
- R-CS-2 overridable: the mirror follows the source unless someone other than
  the link changed it on the mirror; such an override is kept;
- R-CS-3 everything else is never touched (only the names above are ever SET);
- R-CS-5 held back while the topic is a mirror: `message.timestamp.type=
  LogAppendTime` (the mirror keeps CreateTime) and the timestamp bounds (the
  mirror keeps Long.MAX). What is held back is reported.

To tell an operator's override from a value the link set, the link remembers
what it last applied to each mirror, in the destination's state topic under
`configsync/<link>/<mirror>`:

    {"applied": {name: value}, "synced_at": ts, "source": {name: value},
     "held_back": {name: value}, "pending": {name: value}, "checked_at": ts}

`synced_at` is the last time the mirror was found in sync with its source (the
config-sync lag is measured from it, R-CS-4); `pending` holds the values of an
alter in progress, written before the alter, so that a sync that dies between
altering and recording does not later mistake its own values for overrides.
Before a mirror's first sync there is no record: every value the mirror has
then counts as the link's (it got them from the source at creation), so an
override made before the first sync is overwritten once.

Partition growth is left to the copy cycle; partition counts are reported.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirror_pipeline import kafka_clients as kc
from mirror_pipeline.config import PipelineConfig
from mirror_pipeline.errors import MirrorError, MirrorRefused
from mirror_pipeline.link_context import LinkContext
from mirror_pipeline.partitions import grow_partitions, source_partitions
from mirror_pipeline.redaction import scrub
from mirror_pipeline.results import MirrorInfo
from mirror_pipeline.state_store import read_topic
from mirror_pipeline.topic_configs import (
    ALWAYS_SYNCED,
    OVERRIDABLE,
    describe_topic_configs,
    split_for_mirror,
)

__all__ = [
    "SYNCED_STATES",
    "ConfigPlan",
    "ConfigSyncFailed",
    "ConfigSyncResult",
    "MirrorConfigSync",
    "config_drift",
    "config_drifts",
    "config_sync_key",
    "link_config_drift",
    "plan_config_changes",
    "read_sync_records",
    "sync_configs",
    "sync_topic_configs",
]

# Mirror states whose configs are synced; every other state is skipped (a
# STOPPED topic is no mirror any more, a FAILED one is left as it is). A
# PENDING_STOPPED mirror is synced: promote waits for its config lag to be zero.
SYNCED_STATES = frozenset({"ACTIVE", "PAUSED", "PENDING_STOPPED"})

_MANAGED = ALWAYS_SYNCED + OVERRIDABLE


def config_sync_key(link: str, mirror: str) -> str:
    """State-topic key of what the link last applied to `mirror`."""
    return f"configsync/{link}/{mirror}"


# --- the pure part: what to change ------------------------------------------------------------


@dataclass(frozen=True)
class ConfigPlan:
    """What one sync does to one mirror, decided from configs alone.

    `changes`: name -> (the mirror's value, the value to SET);
    `overridden`: name -> the mirror's value, an operator override that is kept;
    `held_back`: name -> the source's value, which the mirror does not get while
    it is a mirror (R-CS-5);
    `applied`: what the link's record holds once the changes land (the values the
    link set or confirmed; for an overridden name, what the link had applied).
    """

    changes: dict[str, tuple[str, str]] = field(default_factory=dict)
    overridden: dict[str, str] = field(default_factory=dict)
    held_back: dict[str, str] = field(default_factory=dict)
    applied: dict[str, str] = field(default_factory=dict)

    @property
    def in_sync(self) -> bool:
        """Nothing left to change (overrides and held-back values do not count)."""
        return not self.changes

    def to_dict(self) -> dict:
        return {
            "changes": {k: list(v) for k, v in self.changes.items()},
            "overridden": dict(self.overridden),
            "held_back": dict(self.held_back),
            "applied": dict(self.applied),
            "in_sync": self.in_sync,
        }


def plan_config_changes(
    source: Mapping[str, str],
    mirror: Mapping[str, str],
    last_applied: Mapping[str, str],
    pending: Mapping[str, str] | None = None,
) -> ConfigPlan:
    """Decide what a mirror gets from its source (pure: configs in, plan out).

    `source` and `mirror` are effective configs (explicit and default values);
    `last_applied` is what the link last applied to this mirror ({} before its
    first sync); `pending` the values of an alter the link started but may not
    have recorded. A name the source does not report is left alone, and so is
    one the mirror's broker does not know.
    """
    pending = pending or {}
    target, held = split_for_mirror(dict(source))
    changes: dict[str, tuple[str, str]] = {}
    overridden: dict[str, str] = {}
    applied: dict[str, str] = {}
    for name in _MANAGED:
        if name not in target or name not in mirror:
            continue
        want, have = target[name], mirror[name]
        if name in OVERRIDABLE and have != want:
            prev = last_applied.get(name)
            link_set = prev is None or have == prev or have == pending.get(name)
            if not link_set:
                # Someone else set it: keep it, and keep remembering what the link applied.
                overridden[name] = have
                applied[name] = prev
                continue
        applied[name] = want
        if have != want:
            changes[name] = (have, want)
    held_back = {
        name: value
        for name, value in held.items()
        # Worth reporting only where the mirror ends up with something else.
        if value != target.get(name, mirror.get(name))
    }
    return ConfigPlan(changes, overridden, held_back, applied)


# --- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MirrorConfigSync:
    """One mirror after a config sync (or, from `config_drift`, as a sync would find it)."""

    mirror_topic: str
    source_topic: str
    state: str
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (old, new)
    overridden: dict[str, str] = field(default_factory=dict)
    held_back: dict[str, str] = field(default_factory=dict)
    in_sync: bool = False
    synced_at: float | None = None  # last time found in sync with the source
    config_sync_lag_ms: int = 0
    source_partitions: int | None = None
    mirror_partitions: int | None = None
    error: str | None = None

    def to_dict(self) -> dict:
        return {
            "mirror_topic": self.mirror_topic,
            "source_topic": self.source_topic,
            "state": self.state,
            "changed": {k: list(v) for k, v in sorted(self.changed.items())},
            "overridden": dict(sorted(self.overridden.items())),
            "held_back": dict(sorted(self.held_back.items())),
            "in_sync": self.in_sync,
            "synced_at": self.synced_at,
            "config_sync_lag_ms": self.config_sync_lag_ms,
            "source_partitions": self.source_partitions,
            "mirror_partitions": self.mirror_partitions,
            "error": self.error,
        }


@dataclass(frozen=True)
class ConfigSyncResult:
    link: str
    started_at: float
    duration_s: float
    mirrors: dict[str, MirrorConfigSync] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # mirror -> why (its state)

    @property
    def failed(self) -> dict[str, str]:
        return {m: r.error for m, r in sorted(self.mirrors.items()) if r.error}

    @property
    def in_sync(self) -> bool:
        return all(r.in_sync for r in self.mirrors.values())

    @property
    def configs_changed(self) -> int:
        """Configs changed, over all mirrors."""
        return sum(len(r.changed) for r in self.mirrors.values())

    def to_dict(self) -> dict:
        return {
            "link": self.link,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "configs_changed": self.configs_changed,
            "in_sync": self.in_sync,
            "failed": self.failed,
            "skipped": dict(sorted(self.skipped.items())),
            "mirrors": {m: r.to_dict() for m, r in sorted(self.mirrors.items())},
        }


class ConfigSyncFailed(MirrorError):
    """Some mirrors' configs could not be synced; the others were. Carries the whole result."""

    def __init__(self, message: str, result: ConfigSyncResult):
        super().__init__(message)
        self.result = result


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
    mirror_partitions: int


def sync_topic_configs(ctx: LinkContext, mirror_topics: list[str] | None = None) -> ConfigSyncResult:
    """One config sync of the link's ACTIVE and PAUSED mirrors (or of those named among them).

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

    checked: dict[str, _Checked] = {}
    errors: dict[str, str] = {}
    for info in selected:
        try:
            checked[info.mirror_topic] = _check(ctx, info, records.get(info.mirror_topic, {}), grow=True)
        except MirrorError as exc:
            errors[info.mirror_topic] = scrub(str(exc), secrets)

    to_change = {m: c for m, c in checked.items() if c.plan.changes}
    if to_change:
        # A mirror promoted or failed over since it was read must not get its
        # mirror-only settings back: look again just before altering.
        current = ctx.registry()
        for m in list(to_change):
            state = current[m].state if m in current else "deleted"
            if state not in SYNCED_STATES:
                skipped[m] = state
                del to_change[m], checked[m]
    if to_change:
        # Intent first: a sync that dies after altering must recognise its own values.
        _write_records(ctx, {m: {**c.record, "pending": {n: new for n, (_, new) in c.plan.changes.items()}} for m, c in to_change.items()})
        errors.update(_alter(ctx, {m: c.plan.changes for m, c in to_change.items()}, secrets))
        _await_visible(ctx, {m: c.plan.changes for m, c in to_change.items() if m not in errors})

    now = time.time()
    results: dict[str, MirrorConfigSync] = {}
    records_out: dict[str, dict] = {}
    for m, c in checked.items():
        failed = m in errors
        last_synced = _last_synced(c.record, c.info)
        synced_at = last_synced if failed else now
        results[m] = MirrorConfigSync(
            mirror_topic=m,
            source_topic=c.info.source_topic,
            state=c.info.state,
            changed={} if failed else dict(c.plan.changes),
            overridden=dict(c.plan.overridden),
            held_back=dict(c.plan.held_back),
            in_sync=not failed,
            synced_at=synced_at,
            config_sync_lag_ms=_lag_ms(now, synced_at),
            source_partitions=c.source_partitions,
            mirror_partitions=c.mirror_partitions,
            error=errors.get(m),
        )
        if failed:
            # The alter did not land (a topic's configs change all or nothing).
            records_out[m] = {k: v for k, v in c.record.items() if k != "pending"}
        else:
            records_out[m] = {
                "applied": c.plan.applied,
                "synced_at": now,
                "source": _managed(c.source),
                "held_back": c.plan.held_back,
                "checked_at": now,
            }
    for info in selected:
        m = info.mirror_topic
        if m in errors and m not in results:  # failed before it could be planned
            last_synced = _last_synced(records.get(m, {}), info)
            results[m] = MirrorConfigSync(
                m, info.source_topic, info.state, synced_at=last_synced,
                config_sync_lag_ms=_lag_ms(now, last_synced), error=errors[m],
            )
    if records_out:
        _write_records(ctx, records_out)

    result = ConfigSyncResult(ctx.link.name, started, time.time() - started, results, skipped)
    if result.failed:
        detail = "; ".join(f"mirror '{m}': {why}" for m, why in result.failed.items())
        raise ConfigSyncFailed(f"config sync of link '{ctx.link.name}' failed for {len(result.failed)} mirror(s): {detail}", result)
    return result


def config_drift(ctx: LinkContext, mirror: str) -> dict:
    """Read-only: what a config sync would do to one mirror now, without doing it.

    {"mirror_topic", "source_topic", "state", "drift": {name: [mirror value, value it would get]},
     "overridden", "held_back", "in_sync", "last_synced_at", "config_sync_lag_ms",
     "source_partitions", "mirror_partitions"}; for a mirror in another state than
    ACTIVE or PAUSED, {"mirror_topic", "source_topic", "state", "drift": {}, "in_sync": None, "note"}.
    Refuses (MirrorRefused) a name that is not a mirror of the link.
    """
    ctx.check_destination()
    registry = ctx.registry()
    if mirror not in registry:
        known = ", ".join(sorted(registry)) or "none"
        raise MirrorRefused(f"no mirror '{mirror}' on link '{ctx.link.name}' (mirrors: {known})")
    info = registry[mirror]
    if info.state not in SYNCED_STATES:
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
    """`config_drift` of every ACTIVE and PAUSED mirror (or of those named among them).

    A mirror that cannot be described gets {"error": ..., "in_sync": False}.
    Raises `ClusterUnreachable` when either cluster does not answer.
    """
    ctx.check_destination()
    ctx.check_source()
    secrets = _secrets(ctx)
    selected, _skipped = _select(ctx, mirror_topics)
    records = read_sync_records(ctx) if selected else {}
    now = time.time()
    out: dict[str, dict] = {}
    for info in selected:
        try:
            out[info.mirror_topic] = _drift(_check(ctx, info, records.get(info.mirror_topic, {})), now)
        except MirrorError as exc:
            last = _last_synced(records.get(info.mirror_topic, {}), info)
            out[info.mirror_topic] = {
                "mirror_topic": info.mirror_topic,
                "source_topic": info.source_topic,
                "state": info.state,
                "in_sync": False,
                "last_synced_at": last,
                "config_sync_lag_ms": _lag_ms(now, last),
                "error": scrub(str(exc), secrets),
            }
    return out


def read_sync_records(ctx: LinkContext) -> dict[str, dict]:
    """What the link last recorded per mirror (`configsync/<link>/<mirror>`; latest record wins)."""
    prefix = config_sync_key(ctx.link.name, "")
    latest: dict[str, bytes | None] = {}
    for key, value, _ in read_topic(ctx.store.conf("state-reader"), ctx.dest_admin, ctx.store.state_topic, ctx.dest.alias):
        if key.startswith(prefix):
            latest[key[len(prefix):]] = value
    out: dict[str, dict] = {}
    for mirror, value in latest.items():
        if value is None:
            continue
        try:
            record = json.loads(value)
        except ValueError:
            continue  # unreadable: as if never synced
        if isinstance(record, dict):
            out[mirror] = record
    return out


# --- helpers --------------------------------------------------------------------------------


def _select(ctx: LinkContext, mirror_topics: list[str] | None) -> tuple[list[MirrorInfo], dict[str, str]]:
    registry = ctx.registry()
    wanted = sorted(registry) if mirror_topics is None else [m for m in dict.fromkeys(mirror_topics) if m in registry]
    selected = [registry[m] for m in wanted if registry[m].state in SYNCED_STATES]
    skipped = {m: registry[m].state for m in wanted if registry[m].state not in SYNCED_STATES}
    return selected, skipped


def _check(ctx: LinkContext, info: MirrorInfo, record: dict, grow: bool = False) -> _Checked:
    """The mirror's configs against the source's; only a sync (`grow`) changes anything.

    Partition count is always synced (R-CS-1), growing being the only change
    Kafka allows; a drift check (describe, the asset check) only reads it.
    """
    src_parts = grow_partitions(ctx, info)[0] if grow else source_partitions(ctx, info)
    dst_parts = kc.topic_partitions(ctx.dest_admin, info.mirror_topic, ctx.dest.alias)
    source = describe_topic_configs(ctx.source_admin, info.source_topic, ctx.source.alias)
    mirror = describe_topic_configs(ctx.dest_admin, info.mirror_topic, ctx.dest.alias)
    plan = plan_config_changes(source, mirror, _str_map(record.get("applied")), _str_map(record.get("pending")))
    return _Checked(info, record, source, plan, src_parts, dst_parts)


def _drift(c: _Checked, now: float) -> dict:
    last = _last_synced(c.record, c.info)
    return {
        "mirror_topic": c.info.mirror_topic,
        "source_topic": c.info.source_topic,
        "state": c.info.state,
        "drift": {k: list(v) for k, v in sorted(c.plan.changes.items())},
        "overridden": dict(sorted(c.plan.overridden.items())),
        "held_back": dict(sorted(c.plan.held_back.items())),
        "in_sync": c.plan.in_sync,
        "last_synced_at": last,
        "config_sync_lag_ms": 0 if c.plan.in_sync else _lag_ms(now, last),
        "source_partitions": c.source_partitions,
        "mirror_partitions": c.mirror_partitions,
    }


def _alter(ctx: LinkContext, changes: dict[str, dict[str, tuple[str, str]]], secrets: list[str]) -> dict[str, str]:
    """SET the changes, one resource per mirror in one request; mirror -> error of those that failed."""
    resources = {
        m: ConfigResource(
            ResourceType.TOPIC,
            m,
            incremental_configs=[ConfigEntry(n, new, incremental_operation=AlterConfigOpType.SET) for n, (_, new) in sorted(c.items())],
        )
        for m, c in changes.items()
    }
    errors: dict[str, str] = {}
    try:
        futures = ctx.dest_admin.incremental_alter_configs(list(resources.values()), request_timeout=kc.REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        reason = _reason(exc)
        return {m: scrub(f"cluster '{ctx.dest.alias}': altering configs of '{m}' failed: {reason}", secrets) for m in resources}
    by_name = {res.name: fut for res, fut in futures.items()}
    for m in resources:
        try:
            by_name[m].result()
        except KafkaException as exc:
            names = ", ".join(sorted(changes[m]))
            errors[m] = scrub(f"cluster '{ctx.dest.alias}': setting {names} on '{m}' failed: {_reason(exc)}", secrets)
    return errors


def _await_visible(ctx: LinkContext, changes: dict[str, dict[str, tuple[str, str]]], timeout: float = 5.0) -> None:
    """Wait (briefly) until the broker describes the new values.

    An alter is acknowledged by the controller; brokers take their metadata a
    moment later. Waiting keeps a drift check that runs right after a sync
    from reporting the old values. Past the timeout the alter still counts.
    """
    deadline = time.monotonic() + timeout
    waiting = dict(changes)
    while waiting and time.monotonic() < deadline:
        for m, c in list(waiting.items()):
            try:
                now = describe_topic_configs(ctx.dest_admin, m, ctx.dest.alias)
            except MirrorError:
                del waiting[m]
                continue
            if all(now.get(n) == new for n, (_, new) in c.items()):
                del waiting[m]
        if waiting:
            time.sleep(0.1)


def _write_records(ctx: LinkContext, records: dict[str, dict]) -> None:
    """All records with one producer (one `_write_plain` each would start a producer per mirror)."""
    errors: list[KafkaError] = []
    prod = kc.producer(ctx.store.conf("state-writer"))
    for mirror, record in sorted(records.items()):
        prod.produce(
            ctx.store.state_topic,
            key=config_sync_key(ctx.link.name, mirror).encode(),
            value=json.dumps(record, sort_keys=True).encode(),
            on_delivery=lambda err, _m: err and errors.append(err),
        )
    remaining = prod.flush(kc.REQUEST_TIMEOUT_S)
    if remaining or errors:
        reason = errors[0].str() if errors else "timed out"
        raise MirrorError(f"cluster '{ctx.dest.alias}': writing config-sync state to '{ctx.store.state_topic}' failed: {reason}")


def _reason(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    return err.str() if isinstance(err, KafkaError) else str(exc)


def _secrets(ctx: LinkContext) -> list[str]:
    return kc.secrets_of(ctx.source_conf("admin")) + kc.secrets_of(ctx.dest_conf("admin"))


def _managed(configs: Mapping[str, str]) -> dict[str, str]:
    return {n: configs[n] for n in _MANAGED if n in configs}


def _str_map(value) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _last_synced(record: dict, info: MirrorInfo) -> float:
    """Last time the mirror was found in sync: its record, else its creation (it got the source's configs then)."""
    synced = record.get("synced_at")
    synced = float(synced) if isinstance(synced, (int, float)) else 0.0
    # A record older than the mirror belongs to an earlier mirror of the same name.
    return max(synced, info.created_at)


def _lag_ms(now: float, since: float) -> int:
    return max(0, int((now - since) * 1000))
