"""What an offset sync did, and the checkpoints it leaves behind (R-OFS-1..7, R-OBS-1).

Plain dataclasses with `to_dict()`, like `results`: the CLI prints them and the
Dagster layer turns them into asset metadata.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class PartitionOffsetSync:
    """One (group, mirror partition): where the group is on the source and where it lands."""

    mirror_topic: str
    partition: int
    source_offset: int | None  # None: no source position, the group was only kept within the mirror's log
    translated_offset: int
    previous_offset: int | None  # the destination group's committed offset before this sync
    action: str  # offset_translation.COMMITTED, UNCHANGED, KEPT_AHEAD, CLAMPED, WOULD_COMMIT
    destination_offset: int | None  # after this sync

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GroupOffsetSync:
    source_group: str
    destination_group: str
    status: str  # "synced", "skipped: N active members", "error: ..."
    partitions: list[PartitionOffsetSync] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_group": self.source_group,
            "destination_group": self.destination_group,
            "status": self.status,
            "partitions": [p.to_dict() for p in self.partitions],
        }


@dataclass
class OffsetSyncResult:
    """One offset sync of a link.

    `offset_sync_lag` counts (group, partition) pairs whose destination offset
    is still below its translation after the sync (groups skipped because they
    are active on the destination count); `checkpoint_latency_ms` is the
    longest time, over this sync's commits, from reading the source group's
    offsets to the destination acknowledging the commit.
    """

    link: str
    mode: str
    committed: int = 0
    offset_sync_lag: int = 0
    checkpoint_latency_ms: float | None = None
    groups: list[GroupOffsetSync] = field(default_factory=list)
    checkpoints_written: int = 0
    duration_s: float = 0.0
    started_at: float = 0.0  # epoch seconds; tells one sync's records from another's
    dry_run: bool = False
    final: bool = False
    notes: list[str] = field(default_factory=list)
    complete: bool = True  # False: the source's groups could not be read (the sync only clamped) or it failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "link": self.link,
            "complete": self.complete,
            "mode": self.mode,
            "committed": self.committed,
            "offset_sync_lag": self.offset_sync_lag,
            "checkpoint_latency_ms": self.checkpoint_latency_ms,
            "checkpoints_written": self.checkpoints_written,
            "duration_s": round(self.duration_s, 3),
            "started_at": self.started_at,
            "dry_run": self.dry_run,
            "final": self.final,
            "notes": list(self.notes),
            "groups": [g.to_dict() for g in self.groups],
        }


@dataclass(frozen=True)
class OffsetCheckpoint:
    """One translated position, as kept in the link's checkpoints topic (R-OFS-5)."""

    link: str
    source_group: str
    destination_group: str
    source_topic: str
    mirror_topic: str
    partition: int
    source_offset: int
    translated_offset: int
    mode: str
    timestamp: float  # when it was translated (seconds since the epoch)

    @property
    def key(self) -> str:
        return checkpoint_key(self.link, self.source_group, self.mirror_topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> bytes:
        body = asdict(self)
        del body["link"]  # in the key
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, link: str, raw: bytes) -> OffsetCheckpoint:
        body = json.loads(raw)
        return cls(
            link=link,
            source_group=body["source_group"],
            destination_group=body["destination_group"],
            source_topic=body["source_topic"],
            mirror_topic=body["mirror_topic"],
            partition=int(body["partition"]),
            source_offset=int(body["source_offset"]),
            translated_offset=int(body["translated_offset"]),
            mode=body.get("mode", "exact"),
            timestamp=float(body.get("timestamp", 0.0)),
        )


def checkpoint_key(link: str, source_group: str, mirror_topic: str, partition: int) -> str:
    return f"{link}/{source_group}/{mirror_topic}/{partition}"
