"""A link's state, kept in compacted internal topics on the destination cluster.

Two topics, named by the replication policy (R-TP-4):
- the *state* topic: one record per mirror (`mirror/<link>/<mirror topic>`),
  the registry of mirrors and their lifecycle state (R-LC-1), one per link
  (`link/<link>`) with the naming its mirrors were created under (R-CFG-4),
  and one per link (`acl/<link>`): the ACL bindings it created (R-ACL-1);
- the *offset-map* topic: the segments of every mirrored partition
  (`<link>/<mirror topic>/<partition>/<mirror offset>`), see `offset_map`.

Because everything lives in Kafka, a fresh machine with a fresh Dagster
instance recovers it all. Segment writes are transactional under a
transactional id per mirror partition: starting a new writer fences the old
one, which is how two overlapping cycles are kept from both writing a
partition.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.topic_configs import describe_topic_configs
from mirror_pipeline.model.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import may_copy

STATE_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.compaction.lag.ms": "0",
    "segment.ms": "3600000",
    # Internal state must never expire: retention does not apply to compacted
    # topics, but a broker default of delete would lose everything.
    "retention.ms": "-1",
}


# How long a reader waits for transactions open on an internal topic to end.
# Our writers' transactions time out after TRANSACTION_TIMEOUT_MS; the broker
# aborts a timed-out one at its next check (every 10 s by default).
TRANSACTION_TIMEOUT_MS = 10000
SETTLE_TIMEOUT_S = 30.0


def segment_key(link: str, mirror: str, partition: int, dest_start: int) -> str:
    return f"{link}/{mirror}/{partition}/{dest_start:020d}"


def mirror_key(link: str, mirror: str) -> str:
    return f"mirror/{link}/{mirror}"


def link_key(link: str) -> str:
    return f"link/{link}"


def acl_key(link: str) -> str:
    return f"acl/{link}"


@dataclass(frozen=True)
class Registry:
    """Everything in a destination's state topic: link -> mirror -> info, and link -> naming record."""

    mirrors: dict[str, dict[str, MirrorInfo]]
    links: dict[str, dict]


def transactional_id(link: str, mirror: str, partition: int) -> str:
    """One writer identity per mirror partition: a new writer fences the previous one.

    Joined by `/`, which no link or topic name holds, so no two partitions share
    an identity (with `.`, link `a` + topic `b.c` was link `a.b` + topic `c`).
    """
    return f"mirror-pipeline/{link}/{mirror}/{partition}"


def state_writer_id(link: str) -> str:
    """One writer identity per link for its mirror records (a `/` never appears in a topic name)."""
    return f"mirror-pipeline/{link}/state"


# Rounds of fence, read, decide, commit before a state change gives up.
STATE_WRITE_ATTEMPTS = 8


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


class StateStore:
    def __init__(self, link: str, dest_alias: str, dest_properties: dict, state_topic: str, offset_map_topic: str):
        self.link = link
        self.dest_alias = dest_alias
        self.state_topic = state_topic
        self.offset_map_topic = offset_map_topic
        self._props = dest_properties
        self._admin: AdminClient | None = None

    # --- plumbing -----------------------------------------------------------------
    @property
    def dest_properties(self) -> dict:
        return dict(self._props)

    def conf(self, role: str, **overrides) -> dict:
        return kc.client_config(self._props, self.link, role, **overrides)

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = kc.admin_client(self.conf("admin"))
        return self._admin

    def _exists(self, topic: str) -> bool:
        return kc.topic_partitions(self.admin, topic, self.dest_alias) is not None

    def ensure_topics(self) -> None:
        """Create the internal topics when missing (a cluster that forbids it can pre-create them)."""
        ensure_internal_topics(self.admin, self.dest_alias, [self.state_topic, self.offset_map_topic],
                               "or set mirror.state.topic / mirror.offset.map.topic")

    # --- mirror registry ------------------------------------------------------------
    def read_mirrors(self) -> dict[str, MirrorInfo]:
        """This link's mirrors."""
        return self.read_all_mirrors().get(self.link, {})

    def read_all_mirrors(self) -> dict[str, dict[str, MirrorInfo]]:
        """Every link's mirrors registered in this destination's state topic: link -> mirror -> info."""
        return self.read_registry().mirrors

    def read_registry(self) -> Registry:
        latest: dict[tuple[str, str], MirrorInfo | None] = {}
        links: dict[str, dict | None] = {}
        if not self._exists(self.state_topic):
            return Registry({}, {})
        for key, value, _ in read_topic(self.conf("state-reader"), self.admin, self.state_topic, self.dest_alias):
            if key.startswith("mirror/"):
                link, mirror = key[len("mirror/"):].split("/", 1)
                latest[(link, mirror)] = None if value is None else MirrorInfo.from_dict(json.loads(value))
            elif key.startswith("link/"):
                links[key[len("link/"):]] = None if value is None else json.loads(value)
        out: dict[str, dict[str, MirrorInfo]] = {}
        for (link, mirror), info in latest.items():
            if info is not None:
                out.setdefault(link, {})[mirror] = info
        return Registry(out, {link: record for link, record in links.items() if record is not None})

    def copyable(self) -> set[str]:
        """This link's mirrors that a writer may copy into now (read after taking a writer, it decides)."""
        return {name for name, info in self.read_mirrors().items() if may_copy(info)}

    def put_link_record(self, record: dict) -> None:
        self._write_plain(self.state_topic, link_key(self.link), json.dumps(record, sort_keys=True).encode())

    def read_acl_record(self) -> dict:
        """What ACL sync recorded for this link ({} before its first sync)."""
        exists = self._exists(self.state_topic)
        records = read_topic(self.conf("state-reader"), self.admin, self.state_topic, self.dest_alias) if exists else ()
        found = [value for key, value, _ in records if key == acl_key(self.link)]
        return json.loads(found[-1]) if found and found[-1] is not None else {}

    def put_acl_record(self, record: dict) -> None:
        self._write_plain(self.state_topic, acl_key(self.link), json.dumps(record, sort_keys=True).encode())

    def put_mirror(self, info: MirrorInfo) -> None:
        """Register or replace a mirror's record unconditionally (creation; everything else decides with `update_mirror`)."""
        self.update_mirrors(lambda _current: [(info.mirror_topic, info)])

    def delete_mirror(self, mirror: str) -> None:
        self.update_mirrors(lambda _current: [(mirror, None)])

    def update_mirror(self, mirror: str, decide: Callable[[MirrorInfo | None], MirrorInfo | None]) -> MirrorInfo | None:
        """Compare-and-set of one mirror's record: `decide(current)` returns the new record, or `current` to keep it."""

        def decide_all(current: dict[str, MirrorInfo]):
            before = current.get(mirror)
            after = decide(before)
            return [] if after is before else [(mirror, after)]

        return self.update_mirrors(decide_all).get(mirror)

    def update_mirrors(self, decide: Callable[[dict[str, MirrorInfo]], Iterable[tuple[str, MirrorInfo | None]]]) -> dict[str, MirrorInfo]:
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
            writer = _TransactionalWriter(self._props, self.link, state_writer_id(self.link), self.state_topic)
            try:
                writer.fence()
                current = self.read_mirrors()
                changes = list(decide(dict(current)))
                writer.write([(mirror_key(self.link, name), None if info is None else json.dumps(info.to_dict()).encode())
                              for name, info in changes], doing="recording mirror state")
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
        kc.produce_all(self.conf("state-writer"), topic, [(key.encode(), value)],
                       f"cluster '{self.dest_alias}': writing state to '{topic}' failed")

    # --- offset-map segments ------------------------------------------------------------
    def read_segments(self, mirrors: Iterable[str] | None = None) -> SegmentSnapshot:
        wanted = set(mirrors) if mirrors is not None else None
        if not self._exists(self.offset_map_topic):
            return SegmentSnapshot({}, 0)
        prefix = f"{self.link}/"
        latest: dict[str, bytes | None] = {}
        end = topic_end(self.admin, self.offset_map_topic, self.dest_alias)
        for key, value, offset in read_topic(self.conf("state-reader"), self.admin, self.offset_map_topic,
                                             self.dest_alias, end=end):
            if key.startswith(prefix):
                latest[key] = value
        by_partition: dict[tuple[str, int], list[tuple[str, Segment]]] = defaultdict(list)
        for key, value in latest.items():
            if value is None:
                continue
            _, mirror, partition, _ = key.split("/")
            if wanted is None or mirror in wanted:
                by_partition[(mirror, int(partition))].append((key, Segment.from_json(value)))
        return SegmentSnapshot(dict(by_partition), end)


class _TransactionalWriter:
    """A fenced transactional producer of one internal topic.

    `fence()` (init_transactions) aborts whatever an older writer with the same
    transactional id left open and makes its further commits fail; every write
    after that is one transaction, so its records land whole or not at all.
    """

    def __init__(self, dest_properties: dict, link: str, txn_id: str, topic: str, where: str = ""):
        self.topic = topic
        self.where = where or f"link '{link}' state"
        self._producer = kc.producer(
            kc.client_config(dest_properties, link, "state-writer",
                             **{"transactional.id": txn_id, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
        )

    def fence(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._producer.init_transactions(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                # e.g. CONCURRENT_TRANSACTIONS while the old writer's transaction is aborted
                if not kc.is_retriable(exc) or time.monotonic() > deadline:
                    raise self._error(exc, "taking over as its writer") from None
                time.sleep(0.2)

    def write(self, records: Iterable[tuple[str, bytes | None]], doing: str = "recording progress") -> None:
        """Write (key, value) records in one transaction; a None value deletes the key."""
        p = self._producer
        try:
            p.begin_transaction()
            for key, value in records:
                p.produce(self.topic, key=key.encode(), value=value)
            p.commit_transaction(30.0)
        except KafkaException as exc:
            raise self._error(exc, doing) from None

    def _error(self, exc: KafkaException, doing: str) -> MirrorError:
        if kc.is_fenced(exc):
            return ConcurrentWriter(f"{self.where}: another writer took over while {doing}; this writer stopped")
        return MirrorError(f"{self.where}: {doing} failed: {kc.error_name(exc)}")

    def close(self) -> None:
        self._producer.flush(5)


class SegmentWriter(_TransactionalWriter):
    """The fenced writer of one mirror partition's segments (see `_TransactionalWriter`).

    Fencing it is also how a stop cuts off every copy task of the partition:
    a task can announce no chunk after another writer fenced it.
    """

    def __init__(self, dest_properties: dict, link: str, mirror: str, partition: int, offset_map_topic: str):
        super().__init__(dest_properties, link, transactional_id(link, mirror, partition), offset_map_topic,
                         where=f"mirror '{mirror}' partition {partition}")
        self.link, self.mirror, self.partition = link, mirror, partition

    def write(self, puts: Iterable[Segment] = (), deletes: Iterable[str] = ()) -> None:
        """Write segments and delete segment keys, in one transaction."""
        records = [(segment_key(self.link, self.mirror, self.partition, seg.dest_start), seg.to_json()) for seg in puts]
        super().write(records + [(key, None) for key in deletes])


def topic_end(admin: AdminClient, topic: str, alias: str, timeout: float = SETTLE_TIMEOUT_S) -> int:
    """The end of everything written to `topic` so far, once every transaction in it has ended.

    Invariant: whatever was written (and acknowledged) before this call is
    below the returned offset and readable by a read_committed reader. The last
    stable offset alone does not give that: a transaction still open (or a
    commit whose markers are not written yet) holds it back, and anything
    committed after that point would be silently missing from the read.
    """
    high = kc.list_offsets(admin, [(topic, 0)], "latest", alias, read_committed=False)[(topic, 0)]
    deadline = time.monotonic() + timeout
    while True:
        stable = kc.list_offsets(admin, [(topic, 0)], "latest", alias)[(topic, 0)]
        if stable >= high:
            return high
        if time.monotonic() > deadline:
            raise MirrorError(
                f"cluster '{alias}': internal topic '{topic}' has had a transaction open for over {timeout:.0f}s "
                f"(a writer killed mid-write; the broker aborts it after its timeout): its state cannot be read "
                f"completely yet, so nothing was decided from it. Retry in a minute"
            )
        time.sleep(0.05)


def read_topic(conf: dict, admin: AdminClient, topic: str, alias: str, start: int = 0, timeout: float = 30.0,
               end: int | None = None) -> Iterator[tuple[str, bytes | None, int]]:
    """Every committed (key, value, offset) of a single-partition topic from `start` to `end`
    (default: its settled end, see `topic_end`)."""
    end = topic_end(admin, topic, alias) if end is None else end
    if end <= start:
        return
    cons = kc.consumer(conf)
    try:
        tp = TopicPartition(topic, 0, start)
        cons.assign([tp])
        deadline = time.monotonic() + timeout
        while True:
            for msg in cons.consume(10000, 0.05):
                if msg.error():
                    raise MirrorError(f"cluster '{alias}': reading '{topic}' failed: {msg.error().str()}")
                if msg.offset() >= end:
                    return
                yield msg.key().decode(), msg.value(), msg.offset()
            if cons.position([TopicPartition(topic, 0)])[0].offset >= end:
                return
            if time.monotonic() > deadline:
                raise MirrorError(f"cluster '{alias}': reading '{topic}' did not reach offset {end} within {timeout:.0f}s")
    finally:
        cons.close()
