"""Config sync's decisions, from configs alone (pure: no I/O): what a mirror gets from its source.

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

To tell an operator's override from a value the link set, the plan is given
what the link last applied (see `config_records`). Also here: the results of a
sync, and the config-sync lag (R-CS-4), measured from the last time a mirror
was found in sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mirror_pipeline.kafka.topic_configs import ALWAYS_SYNCED, OVERRIDABLE, split_for_mirror
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.results import MirrorInfo

# Every name config sync may SET; all others are never touched (R-CS-3).
MANAGED = ALWAYS_SYNCED + OVERRIDABLE


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
    for name in MANAGED:
        if name not in target or name not in mirror:
            continue
        want, have = target[name], mirror[name]
        if name in OVERRIDABLE and have != want:
            prev = last_applied.get(name)
            # The link set it unless it applied a value before and the topic now has neither that one
            # nor the one it was about to apply.
            if prev is not None and have != prev and have != pending.get(name):
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


def managed(configs: Mapping[str, str]) -> dict[str, str]:
    """The configs config sync manages, of those given."""
    return {n: configs[n] for n in MANAGED if n in configs}


def last_synced(record: dict, info: MirrorInfo) -> float:
    """Last time the mirror was found in sync: its record, else its creation (it got the source's configs then)."""
    synced = record.get("synced_at")
    synced = float(synced) if isinstance(synced, (int, float)) else 0.0
    # A record older than the mirror belongs to an earlier mirror of the same name.
    return max(synced, info.created_at)


def lag_ms(now: float, since: float) -> int:
    """Config-sync lag (R-CS-4): milliseconds since the mirror was last found in sync."""
    return max(0, int((now - since) * 1000))


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
