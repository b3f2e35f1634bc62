"""What `verify` returns: plain frozen dataclasses with `to_dict()` (style of `model.results`).

They hold offsets, counts, lengths, header names and short digests, never a
payload (keys, values and header values stay on the clusters) and never a
client setting, so they are safe to print and to put into Dagster metadata.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class RecordSummary:
    """One record, described without its payload."""

    offset: int
    key_length: int  # -1: null key
    value_length: int  # -1: null value (a tombstone)
    digest: str  # short hex digest of key, value and headers: tells two records apart without showing them
    header_names: tuple[str, ...]
    timestamp: int
    timestamp_type: int

    def to_dict(self) -> dict:
        d = asdict(self)
        d["header_names"] = list(self.header_names)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RecordSummary:
        return cls(**{**d, "header_names": tuple(d["header_names"])})


@dataclass(frozen=True)
class Mismatch:
    """The first source offset at which the mirror is not its source."""

    source_offset: int
    mirror_offset: int | None  # where the map puts it (None: the map has no place for it)
    reason: str  # e.g. "value differs", "missing on the mirror"
    source: RecordSummary | None  # None: no such record on the source
    mirror: RecordSummary | None  # None: no such record on the mirror

    def to_dict(self) -> dict:
        return {
            "source_offset": self.source_offset,
            "mirror_offset": self.mirror_offset,
            "reason": self.reason,
            "source": self.source.to_dict() if self.source else None,
            "mirror": self.mirror.to_dict() if self.mirror else None,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Mismatch:
        return cls(
            d["source_offset"],
            d["mirror_offset"],
            d["reason"],
            RecordSummary.from_dict(d["source"]) if d["source"] else None,
            RecordSummary.from_dict(d["mirror"]) if d["mirror"] else None,
        )


@dataclass(frozen=True)
class PartitionVerify:
    """One partition: the common range, what of it was compared, and the first difference."""

    partition: int
    source_from: int  # common range on the source, [source_from, source_until)
    source_until: int
    mirror_from: int  # the same range on the mirror
    mirror_until: int
    ranges_total: int  # checksum ranges in the common range
    ranges_checked: int
    source_records: int  # records compared, per side
    mirror_records: int
    bytes_read: int  # key + value bytes read from both clusters
    compacted_away: int = 0  # records one side's log cleaner removed (compacted topics only): not compared
    mismatch: Mismatch | None = None
    note: str = ""  # why nothing was compared (e.g. nothing mirrored yet)
    error: str = ""  # reading failed: nothing can be said about this partition
    # Mirror offsets [foreign_from, foreign_until) past everything the link wrote or announced:
    # records it did not write (R-MT-9), found whatever range was compared (see `ranges.foreign_tail`).
    foreign_from: int = 0
    foreign_until: int = 0

    @property
    def foreign_records(self) -> int:
        return max(0, self.foreign_until - self.foreign_from)

    @property
    def identical(self) -> bool:
        return self.mismatch is None and not self.error and not self.foreign_records

    def foreign_problem(self) -> str:
        """What the mirror holds that the link did not write, with its offsets ('' when nothing)."""
        n = self.foreign_records
        if not n:
            return ""
        where = (
            f"mirror offset {self.foreign_from}"
            if n == 1
            else f"mirror offsets {self.foreign_from}..{self.foreign_until - 1}"
        )
        return f"{n} record{'' if n == 1 else 's'} the link did not write at {where}, past the end of its offset map"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["mismatch"] = self.mismatch.to_dict() if self.mismatch else None
        d["foreign_records"] = self.foreign_records
        d["identical"] = self.identical
        return d


@dataclass(frozen=True)
class MirrorVerify:
    mirror_topic: str
    source_topic: str
    state: str
    partitions: tuple[PartitionVerify, ...] = ()
    # Why the mirror could not be compared at all (e.g. its source topic is gone); "" when it was.
    skipped: str = ""
    # The registry's flags (FOREIGN_WRITE, STOPPING, REVERSING, DELETING: `model.states`) and its
    # reason, which says why it was flagged. A flagged mirror is never called identical: a flag
    # records what no compare of the common range can undo (e.g. a foreign write, R-MT-9).
    flags: tuple[str, ...] = ()
    state_reason: str = ""

    @property
    def identical(self) -> bool:
        return not self.skipped and not self.flags and all(p.identical for p in self.partitions)

    @property
    def passes(self) -> bool:
        """Whether it lets the verify pass: identical, or skipped as a whole (see `VerifyResult.identical`)
        without a flag."""
        return self.identical or (bool(self.skipped) and not self.flags)

    @property
    def differs(self) -> bool:
        """Comparing found something: a difference, records the link did not write, or a failed read."""
        return any(not p.identical for p in self.partitions)

    @property
    def foreign_records(self) -> int:
        return sum(p.foreign_records for p in self.partitions)

    @property
    def first_mismatch(self) -> tuple[int, Mismatch] | None:
        """(partition, mismatch) of the lowest partition that differs."""
        for p in sorted(self.partitions, key=lambda p: p.partition):
            if p.mismatch is not None:
                return p.partition, p.mismatch
        return None

    @property
    def source_records(self) -> int:
        return sum(p.source_records for p in self.partitions)

    @property
    def bytes_read(self) -> int:
        return sum(p.bytes_read for p in self.partitions)

    def problem(self) -> str:
        """One line naming the mirror, the partition and the first bad offset, and its flags ('' when identical).

        The first difference in the common range comes first, then records the link did not
        write, then a failed read; a flag is named after any of them, or alone with its reason.
        """
        found = self._finding()
        if not self.flags:
            return found
        flagged = f"flagged {', '.join(self.flags)}"
        if found:
            return f"{found} ({flagged})"
        return f"mirror '{self.mirror_topic}' is {flagged}: {self.state_reason or 'no reason recorded'}"

    def _finding(self) -> str:
        first = self.first_mismatch
        if first is not None:
            partition, m = first
            where = "" if m.mirror_offset is None else f" (mirror offset {m.mirror_offset})"
            return (
                f"mirror '{self.mirror_topic}' partition {partition}: first difference at source offset "
                f"{m.source_offset}{where}: {m.reason}"
            )
        ordered = sorted(self.partitions, key=lambda p: p.partition)
        for p in ordered:
            if p.foreign_records:
                return f"mirror '{self.mirror_topic}' partition {p.partition}: {p.foreign_problem()}"
        for p in ordered:
            if p.error:
                return f"mirror '{self.mirror_topic}' partition {p.partition}: not verified: {p.error}"
        return f"not verified: {self.skipped}" if self.skipped else ""

    def to_dict(self) -> dict:
        return {
            "mirror_topic": self.mirror_topic,
            "source_topic": self.source_topic,
            "state": self.state,
            "identical": self.identical,
            "skipped": self.skipped,
            "flags": list(self.flags),
            "state_reason": self.state_reason,
            "foreign_records": self.foreign_records,
            "source_records": self.source_records,
            "bytes_read": self.bytes_read,
            "problem": self.problem(),
            "partitions": [p.to_dict() for p in self.partitions],
        }


@dataclass(frozen=True)
class VerifyResult:
    link: str
    started_at: float
    duration_s: float
    sample: float
    from_offset: int | None
    until_offset: int | None
    max_bytes_per_second: int | None
    tasks: int
    mirrors: dict[str, MirrorVerify] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        """No difference found, nothing failed and no mirror flagged. Mirrors skipped as a whole (only
        when a whole link is verified: their source topic is gone) do not count unless flagged: see `skipped`."""
        return all(m.passes for m in self.mirrors.values())

    @property
    def verdict(self) -> str:
        """ "identical"; "different" when comparing found something (see `MirrorVerify.differs`);
        else "flagged": nothing differs in what was compared, but a mirror is flagged."""
        if self.identical:
            return "identical"
        return "different" if any(m.differs for m in self.mirrors.values()) else "flagged"

    @property
    def flagged(self) -> dict[str, list[str]]:
        return {name: list(m.flags) for name, m in sorted(self.mirrors.items()) if m.flags}

    @property
    def skipped(self) -> dict[str, str]:
        return {name: m.skipped for name, m in sorted(self.mirrors.items()) if m.skipped}

    @property
    def source_records(self) -> int:
        return sum(m.source_records for m in self.mirrors.values())

    @property
    def bytes_read(self) -> int:
        return sum(m.bytes_read for m in self.mirrors.values())

    def problems(self) -> list[str]:
        return [m.problem() for _, m in sorted(self.mirrors.items()) if not m.passes]

    def to_dict(self) -> dict:
        return {
            "link": self.link,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "sample": self.sample,
            "from_offset": self.from_offset,
            "until_offset": self.until_offset,
            "max_bytes_per_second": self.max_bytes_per_second,
            "tasks": self.tasks,
            "identical": self.identical,
            "verdict": self.verdict,
            "source_records": self.source_records,
            "bytes_read": self.bytes_read,
            "problems": self.problems(),
            "skipped": self.skipped,
            "flagged": self.flagged,
            "mirrors": {name: m.to_dict() for name, m in sorted(self.mirrors.items())},
        }
