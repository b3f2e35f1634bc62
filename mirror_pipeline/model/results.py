"""Result objects that every verb returns and both the CLI and Dagster render.

Plain frozen dataclasses with `to_dict()`: the CLI prints them (text or JSON),
the Dagster layer turns them into asset metadata. They never hold secrets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class PartitionCopy:
    """Lineage of one mirrored partition in one cycle (R-OBS-4).

    Source range is [source_from, source_until): the source offsets the cycle
    read past (including gaps it skipped); destination range is
    [dest_from, dest_until): the mirror offsets it wrote.
    """

    partition: int
    source_from: int
    source_until: int
    dest_from: int
    dest_until: int
    records: int
    bytes: int
    lag_after: int
    # Per record copied: acknowledged on the mirror minus its source timestamp
    # (R-OBS-1), over the `latency_records` records that carried one; -1, -1, 0, 0 when none did.
    latency_min_ms: int = -1
    latency_max_ms: int = -1
    latency_sum_ms: int = 0
    latency_records: int = 0
    # Follow mode: its task was ready too late to take over this epoch; the next epoch copies it.
    left_to_next_epoch: bool = False
    # Follow mode: rounds not acknowledged in time, after which the partition was held until none of
    # their records could land, then copied on from what landed.
    rounds_held: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # flat: dataclasses.asdict's deep copy took 1.1 s for a 10,000-partition cycle


@dataclass(frozen=True)
class LatencyStats:
    """Replication latency of `count` records: exact min, max and sum, in milliseconds."""

    count: int = 0
    min_ms: int = -1
    max_ms: int = -1
    sum_ms: int = 0

    @classmethod
    def of(cls, p: PartitionCopy) -> LatencyStats:
        if not p.latency_records:
            return cls()
        return cls(p.latency_records, p.latency_min_ms, p.latency_max_ms, p.latency_sum_ms)

    @classmethod
    def merge(cls, stats: Iterable[LatencyStats]) -> LatencyStats:
        parts = [p for p in stats if p.count]
        if not parts:
            return cls()
        return cls(
            sum(p.count for p in parts),
            min(p.min_ms for p in parts),
            max(p.max_ms for p in parts),
            sum(p.sum_ms for p in parts),
        )

    @property
    def avg_ms(self) -> float | None:
        return self.sum_ms / self.count if self.count else None

    def to_dict(self) -> dict[str, Any]:
        if not self.count:
            return {"records": 0}
        return {
            "records": self.count,
            "min": self.min_ms,
            "max": self.max_ms,
            "avg": round(self.sum_ms / self.count, 3),
        }


@dataclass(frozen=True)
class MirrorCopyResult:
    mirror_topic: str
    source_topic: str
    partitions: tuple[PartitionCopy, ...] = ()
    partitions_added: int = 0

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def lag_after(self) -> int:
        return sum(p.lag_after for p in self.partitions)

    @property
    def latency(self) -> LatencyStats:
        """Replication latency over every record this mirror's copy timed."""
        return LatencyStats.merge(LatencyStats.of(p) for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mirror_topic": self.mirror_topic,
            "source_topic": self.source_topic,
            "records": self.records,
            "bytes": self.bytes,
            "lag_after": self.lag_after,
            "partitions_added": self.partitions_added,
            "latency_ms": self.latency.to_dict(),
            "partitions": [p.to_dict() for p in self.partitions],
        }


MiB = 1024 * 1024


@dataclass(frozen=True)
class TaskMemory:
    """A cycle's largest copy task, by its Spark Python worker's resident memory.

    The link's budget (`mirror.task.memory.bytes`) bounds a task's record
    buffers; what a worker grows by during a task also holds its clients' and
    partitions' own state, so growth past the budget is worth a word.
    """

    budget_bytes: int
    peak_rss_bytes: int = -1  # the highest peak of any task's worker (-1: no task reported one)
    growth_bytes: int = -1  # the most any worker grew from its task's start to its peak

    @classmethod
    def of(cls, budget_bytes: int, tasks: Iterable[tuple[int, int]]) -> TaskMemory:
        """From each task's (resident memory at its start, peak); a task that measured nothing is -1."""
        measured = [(start, peak) for start, peak in tasks if start > 0 and peak > 0]
        if not measured:
            return cls(budget_bytes)
        return cls(budget_bytes, max(p for _, p in measured), max(p - s for s, p in measured))

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_bytes": self.budget_bytes,
            "peak_rss_bytes": self.peak_rss_bytes,
            "growth_bytes": self.growth_bytes,
        }


def over_budget_note(task_memory: dict[str, Any] | None) -> str:
    """A cycle's `task_memory` (`TaskMemory.to_dict`) in a sentence when a task grew past the
    budget; '' otherwise (or when nothing was measured)."""
    if not task_memory or task_memory["growth_bytes"] <= task_memory["budget_bytes"]:
        return ""
    return (
        f"a copy task grew by {task_memory['growth_bytes'] / MiB:,.0f} MiB while it ran, more than the link's "
        f"task memory budget for record buffers ({task_memory['budget_bytes'] / MiB:,.0f} MiB, "
        f"mirror.task.memory.bytes); the busiest Spark worker peaked at {task_memory['peak_rss_bytes'] / MiB:,.0f} MiB"
    )


@dataclass(frozen=True)
class CycleResult:
    link: str
    started_at: float
    duration_s: float
    work_units: int
    mirrors: dict[str, MirrorCopyResult] = field(default_factory=dict)
    # Mirrors created moments ago whose topics the destination did not list yet: the next cycle copies them.
    not_listed_yet: tuple[str, ...] = ()
    task_memory: TaskMemory | None = None
    # Follow mode: the slowest task's take-over, in ms after the hand-over time (`fenced`, and
    # `ready` to copy); None when no task took over from an epoch before. The epoch's figure, not
    # a partition's lineage.
    hand_over_ms: dict[str, int] | None = None
    # The lag after the cycle of each mirror it planned every partition of, as `mirror_overview` would read
    # it (the copy asset's checks take these and read only the other mirrors). Not in `to_dict`: the same
    # figures are each mirror's `lag_after` there.
    measured_lags: dict[str, int] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(m.records for m in self.mirrors.values())

    @property
    def bytes(self) -> int:
        return sum(m.bytes for m in self.mirrors.values())

    @property
    def lag_after(self) -> int:
        return sum(m.lag_after for m in self.mirrors.values())

    @property
    def left_to_next_epoch(self) -> int:
        """Follow mode: partitions whose task was ready too late to copy in this epoch."""
        return sum(p.left_to_next_epoch for m in self.mirrors.values() for p in m.partitions)

    @property
    def rounds_held(self) -> int:
        """Follow mode: rounds not acknowledged in time, their partitions held and then copied on."""
        return sum(p.rounds_held for m in self.mirrors.values() for p in m.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "link": self.link,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "work_units": self.work_units,
            "records": self.records,
            "bytes": self.bytes,
            "lag_after": self.lag_after,
            "left_to_next_epoch": self.left_to_next_epoch,
            "rounds_held": self.rounds_held,
            "hand_over_ms": self.hand_over_ms,
            "mirrors": {name: m.to_dict() for name, m in sorted(self.mirrors.items())},
            "not_listed_yet": list(self.not_listed_yet),
            "task_memory": self.task_memory.to_dict() if self.task_memory else None,
        }


@dataclass(frozen=True)
class MirrorInfo:
    """A mirror topic as registered in the destination cluster's state topic (R-LC-1)."""

    link: str
    mirror_topic: str
    source_topic: str
    state: str
    state_time: float
    reason: str
    created_at: float
    # Source configs held back while the topic is a mirror, applied at promote/failover (R-CS-5).
    held_back: dict[str, str] = field(default_factory=dict)
    # Why copying is refused although the state allows it, e.g. FOREIGN_WRITE (R-MT-9).
    flags: tuple[str, ...] = ()
    # When the source topic was first found missing or unreadable (0: it is fine) (R-LC-5).
    failing_since: float = 0.0
    # Set when the mirror stops: per partition, the next source offset it would have copied (R-LC-4).
    stopped_at: float = 0.0
    last_source_offsets: dict[int, int] = field(default_factory=dict)
    # The last transitions: [time, from, to, reason], newest last.
    history: tuple[tuple[float, str, str, str], ...] = ()
    # The source cluster's alias in the config that created the mirror, and its cluster id.
    source_cluster: str = ""
    source_cluster_id: str = ""
    # A mirror made by `reverse` (R-LC-7): the stopped mirror it follows, the plan
    # per partition and how far carrying it out got (see `operations.reverse`).
    reverse_of: dict[str, Any] = field(default_factory=dict)
    # The destination ACLs that keep the mirror read-only, and why they cannot when
    # they cannot (see `link.write_guard`): {"bindings": [...], "unenforced": "..."}.
    write_guard: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["flags"] = list(self.flags)
        d["history"] = [list(h) for h in self.history]
        d["last_source_offsets"] = {str(k): v for k, v in self.last_source_offsets.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MirrorInfo:
        d = dict(d)
        d["flags"] = tuple(d.get("flags", ()))
        d["history"] = tuple(tuple(h) for h in d.get("history", ()))
        d["last_source_offsets"] = {int(k): v for k, v in d.get("last_source_offsets", {}).items()}
        return cls(**d)


@dataclass(frozen=True)
class PartitionStatus:
    """One partition of a described mirror; the source's figures are None when the source did not answer."""

    partition: int
    source_log_start: int | None
    source_log_end: int | None
    mirror_log_start: int
    mirror_log_end: int
    next_source_offset: int | None
    lag: int | None
    offsets_preserved: bool
    offset_map_runs: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MirrorDescription:
    mirror: MirrorInfo
    source_partitions: int | None
    mirror_partitions: int
    partitions: tuple[PartitionStatus, ...]
    source_timestamp_type: str | None
    held_back_configs: dict[str, str]
    config: dict[str, Any] = field(default_factory=dict)  # drift, overrides, config-sync lag (R-CS-4)
    # Why the source's side is unknown ("" when the source answered): the
    # description then holds what the destination and the registry know.
    source_unknown: str = ""
    # Whether only the link can write to the mirror, in one sentence (R-ACL-3).
    read_only: str = ""

    @property
    def lag(self) -> int | None:
        """Records not yet mirrored; None when the source did not answer (unknown, not zero)."""
        known = [p.lag for p in self.partitions if p.lag is not None]
        return None if len(known) < len(self.partitions) else sum(known)

    @property
    def offsets_preserved(self) -> bool:
        return all(p.offsets_preserved for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.mirror.to_dict(),
            "source_partitions": self.source_partitions,
            "mirror_partitions": self.mirror_partitions,
            "lag": self.lag,
            "offsets": "preserved" if self.offsets_preserved else "translated",
            "source_timestamp_type": self.source_timestamp_type,
            "held_back_configs": self.held_back_configs,
            "config": self.config,
            "source_unknown": self.source_unknown,
            "read_only": self.read_only,
            "partitions": [p.to_dict() for p in self.partitions],
        }
