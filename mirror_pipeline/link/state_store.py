"""A link's state, kept in compacted internal topics on the destination cluster.

Two topics, named by the replication policy (R-TP-4):
- the *state* topic: one record per mirror (`mirror/<link>/<mirror topic>`),
  the registry of mirrors and their lifecycle state (R-LC-1), one per link
  (`link/<link>`) with the naming its mirrors were created under (R-CFG-4),
  and one per link (`acl/<link>`): the ACL bindings it created (R-ACL-1);
- the *offset-map* topic: the segments of every mirrored partition
  (`<link>/<mirror topic>/<partition>/<mirror offset>`), see `offset_map`.

Because everything lives in Kafka, a fresh machine with a fresh Dagster
instance recovers it all. Segment writes are transactional under the
transactional id of the partition's writer slot: starting a new writer fences
the old one, which is how two overlapping cycles are kept from both writing a
partition (`state_writers`). Both topics are read through this process's
`compacted_view`, which fetches only what was written since its last read.

The keys (`state_keys`), the writers (`state_writers`) and the topic readers
(`topic_reading`) live in their own modules; their names are importable from
here too.
"""

from __future__ import annotations

import functools
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.topic_configs import describe_topic_configs
from mirror_pipeline.link.compacted_view import cluster_key, read_compacted
from mirror_pipeline.link.internal_topic_cleaning import CLEANING, settle_cleaning
from mirror_pipeline.link.state_keys import (
    acl_key,
    link_key,
    mirror_key,
    segment_key,
    state_writer_id,
    transactional_id,
)
from mirror_pipeline.link.state_writers import SegmentWriter, SlotWriter, TransactionalWriter
from mirror_pipeline.link.topic_reading import SETTLE_TIMEOUT_S, read_topic
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment, without_stale
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import may_copy

# Names that moved to their own modules and are still imported from here.
__all__ = [
    "STATE_TOPIC_CONFIG",
    "STATE_WRITE_ATTEMPTS",
    "Registry",
    "SegmentSnapshot",
    "SegmentWriter",
    "SlotWriter",
    "StateStore",
    "TransactionalWriter",
    "acl_key",
    "ensure_internal_topics",
    "link_key",
    "mirror_key",
    "read_topic",
    "segment_key",
    "live_segments",
    "newest_starts",
    "segment_writes",
    "segment_writes_since",
    "state_writer_id",
    "transactional_id",
]

STATE_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.compaction.lag.ms": "0",
    # Every command reads these topics whole (a long-lived process reads on from its last view,
    # `compacted_view`), so what the cleaner has not compacted yet is read again and again: a cycle
    # copying to each of a link's 10,000 partitions announces a segment for each, and merging them
    # (every 16th) deletes 15 keys a partition. With an hour's segments (the active one is never
    # compacted) and the broker's day of tombstones, the map held 475,000 records after about 20
    # such cycles, a second to read each time. Segments roll every 10 minutes, and a tombstone is
    # kept 10 minutes after the cleaner reached it: far longer than any reader takes between reading
    # a key and reading its deletion (a view older than half of it is read again from 0), and a
    # reader that misses one still meets the merged segment that replaced the deleted key.
    **CLEANING,  # segment.ms and delete.retention.ms, given to an earlier version's topics too
    # Internal state must never expire: retention does not apply to compacted
    # topics, but a broker default of delete would lose everything.
    "retention.ms": "-1",
}

# Rounds of fence, read, decide, commit before a state change gives up.
STATE_WRITE_ATTEMPTS = 8
# A process reads the offset map several times a cycle (the plan, the consolidation, the lags), and
# most values are the same as last time: each is parsed once (on 10,000 partitions a read parsed
# 50,000 segments, about a second). A segment is frozen, so one parsed value serves every reader.
_parsed_segment = functools.lru_cache(maxsize=1 << 17)(Segment.from_json)


@dataclass(frozen=True)
class Registry:
    """Everything in a destination's state topic: link -> mirror -> info, and link -> naming record."""

    mirrors: dict[str, dict[str, MirrorInfo]]
    links: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class SegmentSnapshot:
    """Segments read from the offset-map topic, and where reading stopped."""

    segments: dict[tuple[str, int], list[tuple[str, Segment]]]  # (mirror, partition) -> [(key, segment)]
    end_offset: int  # offset-map topic's end when read: later writes are someone else's


def ensure_internal_topics(admin: AdminClient, alias: str, topics: list[str], hint: str) -> None:
    """Create missing internal topics as compacted, single-partition topics; `hint` ends the error."""
    missing = [t for t in topics if kc.topic_partitions(admin, t, alias) is None]
    for topic in sorted(set(topics) - set(missing)):
        policy = describe_topic_configs(admin, topic, alias).get("cleanup.policy", "")
        if "compact" not in policy.split(","):
            raise MirrorError(
                f"cluster '{alias}': internal topic '{topic}' exists with cleanup.policy={policy or 'unknown'}; "
                f"it must be compact (its records are kept by key, never by age): change it, {hint}"
            )
    if not missing:
        return
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=1, replication_factor=-1, config=STATE_TOPIC_CONFIG) for t in missing],
        request_timeout=kc.REQUEST_TIMEOUT_S,
    )
    for topic, fut in futures.items():
        try:
            fut.result()
        except KafkaException as exc:
            if kc.error_code(exc) != KafkaError.TOPIC_ALREADY_EXISTS:
                raise MirrorError(
                    f"cluster '{alias}': cannot create internal topic '{topic}': {kc.error_name(exc)} "
                    f"(create it yourself as a compacted topic with one partition, {hint})"
                ) from None


# A segment written to the offset-map topic: ((mirror, partition), its start, its value or None
# for a deletion).
SegmentWrite = tuple[tuple[str, int], int, bytes | None]


def segment_writes_since(
    conf: dict[str, Any], admin: AdminClient, offset_map_topic: str, alias: str, link: str, since: int
) -> list[SegmentWrite]:
    """Every segment of `link` written at or after offset `since` of the offset-map topic, in the
    order written: what other writers, or the epoch before, did since a plan."""
    return segment_writes(read_topic(conf, admin, offset_map_topic, alias, start=since), link)


def segment_writes(records: Iterable[tuple[str, bytes | None, int]], link: str) -> list[SegmentWrite]:
    """The segments of `link` among records of the offset-map topic, in the order written."""
    prefix = f"{link}/"
    writes = []
    for key, value, _ in records:
        if key.startswith(prefix):
            _, mirror, partition, start = key.split("/")
            writes.append(((mirror, int(partition)), int(start), value))
    return writes


def newest_starts(writes: Iterable[SegmentWrite]) -> dict[tuple[str, int], int]:
    """(mirror, partition) -> the highest start of a segment written (deletions left out)."""
    newest: dict[tuple[str, int], int] = {}
    for tp, start, value in writes:
        if value is not None:
            newest[tp] = max(newest.get(tp, -1), start)
    return newest


def live_segments(writes: Iterable[SegmentWrite]) -> dict[tuple[str, int], list[Segment]]:
    """(mirror, partition) -> the segments written, not deleted or replaced since (`offset_map.without_stale`)."""
    latest: dict[tuple[str, int], dict[int, bytes | None]] = defaultdict(dict)
    for tp, start, value in writes:
        latest[tp][start] = value
    return {
        tp: without_stale(_parsed_segment(raw) for raw in by_start.values() if raw is not None)
        for tp, by_start in latest.items()
    }


class StateStore:
    """`offset_map_topic` None: which topic holds the link's offset maps is read from its
    state when first needed, by `find_offset_map` (see `LinkContext.registry`). `admin`: the
    destination's admin client to use, when the caller already holds one (a copy task)."""

    def __init__(
        self,
        link: str,
        dest_alias: str,
        dest_properties: dict[str, Any],
        state_topic: str,
        offset_map_topic: str | None,
        find_offset_map: Callable[[], None] | None = None,
        admin: AdminClient | None = None,
        settle_timeout: float = SETTLE_TIMEOUT_S,
    ):
        self.link = link
        # How long a read waits for a transaction open on an internal topic (`topic_end`).
        self.settle_timeout = settle_timeout
        self.dest_alias = dest_alias
        self.state_topic = state_topic
        self._offset_map_topic = offset_map_topic
        self.find_offset_map = find_offset_map
        self._props = dest_properties
        self._admin = admin
        self._cluster = cluster_key(dest_properties)

    # --- plumbing -----------------------------------------------------------------
    @property
    def offset_map_topic(self) -> str:
        if self._offset_map_topic is None and self.find_offset_map is not None:
            self.find_offset_map()
        if self._offset_map_topic is None:
            # Guessing a name here could read an empty map for a link whose map is elsewhere.
            raise RuntimeError(f"link '{self.link}': no offset-map topic is known")
        return self._offset_map_topic

    @offset_map_topic.setter
    def offset_map_topic(self, topic: str) -> None:
        self._offset_map_topic = topic

    @property
    def dest_properties(self) -> dict[str, Any]:
        return dict(self._props)

    def conf(self, role: str, **overrides: Any) -> dict[str, Any]:
        return kc.client_config(self._props, self.link, role, **overrides)

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = kc.admin_client(self.conf("admin"))
        return self._admin

    def read_latest(self, topic: str) -> tuple[Mapping[str, bytes], int] | None:
        """The latest value of every key of internal topic `topic` up to its settled end, and
        that end; None when the topic does not exist (see `compacted_view`)."""
        snapshot = read_compacted(
            self.conf("state-reader"), self.admin, topic, self.dest_alias, self._cluster, self.settle_timeout
        )
        return None if snapshot is None else (snapshot.latest, snapshot.end)

    def ensure_topics(self) -> None:
        """Create the internal topics when missing (a cluster that forbids it can pre-create them)."""
        ensure_internal_topics(
            self.admin,
            self.dest_alias,
            [self.state_topic, self.offset_map_topic],
            "or set mirror.state.topic / mirror.offset.map.topic",
        )
        self.settle_cleaning()

    def settle_cleaning(self, topics: Sequence[str] = ()) -> None:
        """Give `topics` (default: the state and offset-map topics) this version's cleaning settings
        where an earlier version made them without (`internal_topic_cleaning`), once a process."""
        named = list(topics) or [self.state_topic, self.offset_map_topic]
        settle_cleaning(self.admin, self.dest_alias, self._cluster, named)

    # --- mirror registry ------------------------------------------------------------
    def read_mirrors(self) -> dict[str, MirrorInfo]:
        """This link's mirrors."""
        return self.read_all_mirrors().get(self.link, {})

    def read_all_mirrors(self) -> dict[str, dict[str, MirrorInfo]]:
        """Every link's mirrors registered in this destination's state topic: link -> mirror -> info."""
        return self.read_registry().mirrors

    def read_registry(self) -> Registry:
        state = self.read_latest(self.state_topic)
        if state is None:
            return Registry({}, {})
        mirrors: dict[str, dict[str, MirrorInfo]] = {}
        links: dict[str, dict[str, Any]] = {}
        for key, value in state[0].items():
            if key.startswith("mirror/"):
                link, mirror = key[len("mirror/") :].split("/", 1)
                mirrors.setdefault(link, {})[mirror] = MirrorInfo.from_dict(json.loads(value))
            elif key.startswith("link/"):
                links[key[len("link/") :]] = json.loads(value)
        return Registry(mirrors, links)

    def copyable(self) -> set[str]:
        """This link's mirrors that a writer may copy into now (read after taking a writer, it decides)."""
        return {name for name, info in self.read_mirrors().items() if may_copy(info)}

    def put_link_record(self, record: dict[str, Any]) -> None:
        self._write_plain(self.state_topic, link_key(self.link), json.dumps(record, sort_keys=True).encode())

    def read_acl_record(self) -> dict[str, Any]:
        """What ACL sync recorded for this link ({} before its first sync)."""
        state = self.read_latest(self.state_topic)
        value = None if state is None else state[0].get(acl_key(self.link))
        return {} if value is None else json.loads(value)

    def put_acl_record(self, record: dict[str, Any]) -> None:
        self._write_plain(self.state_topic, acl_key(self.link), json.dumps(record, sort_keys=True).encode())

    def put_mirror(self, info: MirrorInfo) -> None:
        """Register or replace a mirror's record unconditionally
        (creation; everything else decides with `update_mirror`)."""
        self.update_mirrors(lambda _current: [(info.mirror_topic, info)])

    def delete_mirror(self, mirror: str) -> None:
        self.update_mirrors(lambda _current: [(mirror, None)])

    # A `decide` that never deletes the record gets it back, never None.
    @overload
    def update_mirror(self, mirror: str, decide: Callable[[MirrorInfo | None], MirrorInfo]) -> MirrorInfo: ...
    @overload
    def update_mirror(
        self, mirror: str, decide: Callable[[MirrorInfo | None], MirrorInfo | None]
    ) -> MirrorInfo | None: ...
    def update_mirror(self, mirror: str, decide: Callable[[MirrorInfo | None], MirrorInfo | None]) -> MirrorInfo | None:
        """Compare-and-set of one mirror's record: `decide(current)` returns the new record, or `current` to keep it."""

        def decide_all(current: dict[str, MirrorInfo]) -> list[tuple[str, MirrorInfo | None]]:
            before = current.get(mirror)
            after = decide(before)
            return [] if after is before else [(mirror, after)]

        return self.update_mirrors(decide_all).get(mirror)

    def update_mirrors(
        self, decide: Callable[[dict[str, MirrorInfo]], Iterable[tuple[str, MirrorInfo | None]]]
    ) -> dict[str, MirrorInfo]:
        """Change this link's mirror records as `decide(current records)` says, decided from the records as they are.

        Invariant (compare-and-set by fencing): every change is decided from a
        read made after this writer fenced the link's previous state writer,
        and is committed only if no other writer fenced this one since. A
        change another process committed in between is therefore never
        overwritten by a decision taken from an older read: the loser reads
        again and decides again (R-LC-8). `decide` may be called more than
        once and may raise to refuse.
        """
        current = self.read_mirrors()
        if not list(decide(dict(current))):
            return current  # nothing to change: no need to take the writer
        for attempt in range(STATE_WRITE_ATTEMPTS):
            writer = TransactionalWriter(self._props, self.link, state_writer_id(self.link), self.state_topic)
            try:
                writer.fence()
                current = self.read_mirrors()
                changes = list(decide(dict(current)))
                writer.write(
                    [
                        (mirror_key(self.link, name), None if info is None else json.dumps(info.to_dict()).encode())
                        for name, info in changes
                    ],
                    doing="recording mirror state",
                )
                for name, info in changes:
                    if info is None:
                        current.pop(name, None)
                    else:
                        current[name] = info
                return current
            except ConcurrentWriter:
                if attempt + 1 == STATE_WRITE_ATTEMPTS:
                    raise
                time.sleep(0.05 * (attempt + 1))
            finally:
                writer.close()
        raise AssertionError("unreachable")

    def _write_plain(self, topic: str, key: str, value: bytes | None) -> None:
        kc.produce_all(
            self.conf("state-writer"),
            topic,
            [(key.encode(), value)],
            f"cluster '{self.dest_alias}': writing state to '{topic}' failed",
        )

    # --- offset-map segments ------------------------------------------------------------
    def read_segments(self, mirrors: Iterable[str] | None = None) -> SegmentSnapshot:
        """This link's segments (of `mirrors`, or all), in key order per partition (the
        zero-padded mirror offset in the key makes that mirror-offset order)."""
        wanted = set(mirrors) if mirrors is not None else None
        offset_map = self.read_latest(self.offset_map_topic)
        if offset_map is None:
            return SegmentSnapshot({}, 0)
        latest, end = offset_map
        prefix = f"{self.link}/"
        by_partition: dict[tuple[str, int], list[tuple[str, Segment]]] = defaultdict(list)
        for key in sorted(k for k in latest if k.startswith(prefix)):
            _, mirror, partition, _ = key.split("/")
            if wanted is None or mirror in wanted:
                by_partition[(mirror, int(partition))].append((key, _parsed_segment(latest[key])))
        return SegmentSnapshot(dict(by_partition), end)
