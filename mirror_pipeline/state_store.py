"""A link's state, kept in compacted internal topics on the destination cluster.

Two topics, named by the replication policy (R-TP-4):
- the *state* topic: one record per mirror (`mirror/<link>/<mirror topic>`),
  the registry of mirrors and their lifecycle state (R-LC-1), and one per link
  (`link/<link>`) with the naming its mirrors were created under (R-CFG-4);
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
from typing import Iterable, Iterator

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_pipeline import kafka_clients as kc
from mirror_pipeline.errors import ConcurrentWriter, MirrorError
from mirror_pipeline.offset_map import Segment
from mirror_pipeline.results import MirrorInfo

STATE_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.compaction.lag.ms": "0",
    "segment.ms": "3600000",
    # Internal state must never expire: retention does not apply to compacted
    # topics, but a broker default of delete would lose everything.
    "retention.ms": "-1",
}


def segment_key(link: str, mirror: str, partition: int, dest_start: int) -> str:
    return f"{link}/{mirror}/{partition}/{dest_start:020d}"


def mirror_key(link: str, mirror: str) -> str:
    return f"mirror/{link}/{mirror}"


def link_key(link: str) -> str:
    return f"link/{link}"


@dataclass(frozen=True)
class Registry:
    """Everything in a destination's state topic: link -> mirror -> info, and link -> naming record."""

    mirrors: dict[str, dict[str, MirrorInfo]]
    links: dict[str, dict]


def transactional_id(link: str, mirror: str, partition: int) -> str:
    """One writer identity per mirror partition: a new writer fences the previous one."""
    return f"mirror-pipeline.{link}.{mirror}.{partition}"


@dataclass(frozen=True)
class SegmentSnapshot:
    """Segments read from the offset-map topic, and where reading stopped."""

    segments: dict[tuple[str, int], list[tuple[str, Segment]]]  # (mirror, partition) -> [(key, segment)]
    end_offset: int  # offset-map topic's end when read: later writes are someone else's


def ensure_internal_topics(admin: AdminClient, alias: str, topics: list[str], hint: str) -> None:
    """Create missing internal topics as compacted, single-partition topics; `hint` ends the error."""
    missing = [t for t in topics if kc.topic_partitions(admin, t, alias) is None]
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
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise MirrorError(
                    f"cluster '{alias}': cannot create internal topic '{topic}': {exc.args[0].str()} "
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

    def put_link_record(self, record: dict) -> None:
        self._write_plain(self.state_topic, link_key(self.link), json.dumps(record, sort_keys=True).encode())

    def put_mirror(self, info: MirrorInfo) -> None:
        self._write_plain(self.state_topic, mirror_key(self.link, info.mirror_topic), json.dumps(info.to_dict()).encode())

    def delete_mirror(self, mirror: str) -> None:
        self._write_plain(self.state_topic, mirror_key(self.link, mirror), None)

    def _write_plain(self, topic: str, key: str, value: bytes | None) -> None:
        errors: list[KafkaError] = []
        prod = kc.producer(self.conf("state-writer"))
        prod.produce(topic, key=key.encode(), value=value, on_delivery=lambda err, _m: err and errors.append(err))
        remaining = prod.flush(kc.REQUEST_TIMEOUT_S)
        if remaining or errors:
            reason = errors[0].str() if errors else "timed out"
            raise MirrorError(f"cluster '{self.dest_alias}': writing state to '{topic}' failed: {reason}")

    # --- offset-map segments ------------------------------------------------------------
    def read_segments(self, mirrors: Iterable[str] | None = None) -> SegmentSnapshot:
        wanted = set(mirrors) if mirrors is not None else None
        if not self._exists(self.offset_map_topic):
            return SegmentSnapshot({}, 0)
        prefix = f"{self.link}/"
        latest: dict[str, bytes | None] = {}
        end = 0
        for key, value, offset in read_topic(self.conf("state-reader"), self.admin, self.offset_map_topic, self.dest_alias):
            end = offset + 1
            if key.startswith(prefix):
                latest[key] = value
        by_partition: dict[tuple[str, int], list[tuple[str, Segment]]] = defaultdict(list)
        for key, value in latest.items():
            if value is None:
                continue
            _, mirror, partition, _ = key.split("/")
            if wanted is None or mirror in wanted:
                by_partition[(mirror, int(partition))].append((key, Segment.from_json(value)))
        snapshot_end = max(end, topic_end(self.admin, self.offset_map_topic, self.dest_alias))
        return SegmentSnapshot(dict(by_partition), snapshot_end)


class SegmentWriter:
    """The fenced writer of one mirror partition's segments.

    `fence()` (init_transactions) aborts whatever an older writer with the same
    transactional id left open and makes its further commits fail; every write
    after that is one transaction, so segments land whole or not at all.
    """

    def __init__(self, dest_properties: dict, link: str, mirror: str, partition: int, offset_map_topic: str):
        self.link, self.mirror, self.partition = link, mirror, partition
        self.topic = offset_map_topic
        self._producer = kc.producer(
            kc.client_config(
                dest_properties,
                link,
                "state-writer",
                **{"transactional.id": transactional_id(link, mirror, partition), "transaction.timeout.ms": 60000},
            )
        )

    def fence(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._producer.init_transactions(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                # e.g. CONCURRENT_TRANSACTIONS while the old writer's transaction is aborted
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise self._error(exc, "taking over as its writer") from None
                time.sleep(0.2)

    def write(self, puts: Iterable[Segment] = (), deletes: Iterable[str] = ()) -> None:
        """Write segments and delete segment keys, in one transaction."""
        p = self._producer
        try:
            p.begin_transaction()
            for seg in puts:
                p.produce(self.topic, key=segment_key(self.link, self.mirror, self.partition, seg.dest_start).encode(), value=seg.to_json())
            for key in deletes:
                p.produce(self.topic, key=key.encode(), value=None)
            p.commit_transaction(30.0)
        except KafkaException as exc:
            raise self._error(exc, "recording progress") from None

    def _error(self, exc: KafkaException, doing: str) -> MirrorError:
        err = exc.args[0]
        where = f"mirror '{self.mirror}' partition {self.partition}"
        if err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
            return ConcurrentWriter(f"{where}: another cycle took over this partition while {doing}; this writer stopped")
        return MirrorError(f"{where}: {doing} failed: {err.str()}")

    def close(self) -> None:
        self._producer.flush(5)


def topic_end(admin: AdminClient, topic: str, alias: str) -> int:
    ends = kc.list_offsets(admin, [(topic, 0)], "latest", alias)
    return ends[(topic, 0)]


def read_topic(conf: dict, admin: AdminClient, topic: str, alias: str, start: int = 0, timeout: float = 30.0) -> Iterator[tuple[str, bytes | None, int]]:
    """Every committed (key, value, offset) of a single-partition topic from `start` to its current end."""
    end = topic_end(admin, topic, alias)
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
