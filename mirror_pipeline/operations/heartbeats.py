"""Heartbeats (R-OBS-3): a liveness and latency probe per link.

With `emit.heartbeats.enabled`, the link writes a small record to a heartbeats
topic on its *source* (`mirror.heartbeats.topic`, by default
`_mirror-pipeline.heartbeats`): at the start of every cycle, and every
`emit.heartbeats.interval.seconds` while it follows. The topic is mirrored like
any other, as `<source alias><sep><heartbeats topic>` on the destination (one
mirror per source, so a cluster's own heartbeats never meet another's).

A heartbeat's source timestamp is when it was written, so two figures come
from the mirror:
- its age: how long ago the source wrote the newest heartbeat that has reached
  the mirror. It grows without bound when replication stops, whatever stopped it;
- its latency: arrival on the mirror minus that timestamp, the per-record
  `replication-latency-ms` of the heartbeats mirror, as for any mirror.

Writing on the source needs WRITE (and CREATE, the first time) on that one
topic, which is why heartbeats are off by default: without them the source
principal only reads (R-ACL-3). A heartbeat that cannot be written is logged
and never stops the copying.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import NewTopic

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.partition_reading import committed_records
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.operations.mirrors import create_mirror

log = logging.getLogger(__name__)

# The source's heartbeats topic: one partition, a day of heartbeats (about 8 MB at one a second).
TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": str(24 * 3600 * 1000)}
SEND_TIMEOUT_S = 10.0


class HeartbeatEmitter:
    """Writes one link's heartbeats on its source, with one producer for as long as it lives."""

    def __init__(self, ctx: LinkContext):
        self.ctx = ctx
        self.topic = ctx.naming.internal_topic("heartbeats")
        self._producer: Producer | None = None

    def beat(self) -> str:
        """Write one heartbeat; "" when it landed, else why not (also logged)."""
        try:
            if self._producer is None:
                self._prepare()
                self._producer = kc.producer(self.ctx.source_conf("heartbeats"))
            now_ms = int(time.time() * 1000)
            value = {
                "link": self.ctx.link.name,
                "source": self.ctx.source.alias,
                "target": self.ctx.dest.alias,
                "emitted_ms": now_ms,
            }
            failures: list[KafkaError] = []

            def on_delivery(err: KafkaError | None, _msg: Message) -> None:
                if err is not None:
                    failures.append(err)

            self._producer.produce(
                self.topic,
                key=self.ctx.link.name.encode(),
                value=json.dumps(value).encode(),
                partition=0,
                timestamp=now_ms,
                on_delivery=on_delivery,
            )
            if self._producer.flush(SEND_TIMEOUT_S):
                raise MirrorError(f"not acknowledged within {SEND_TIMEOUT_S:.0f}s")
            if failures:
                raise MirrorError(failures[0].name())
            return ""
        except (MirrorError, KafkaException) as exc:
            why = (
                f"link '{self.ctx.link.name}': no heartbeat written to '{self.topic}' on cluster "
                f"'{self.ctx.source.alias}': {kc.describe_error(exc, self.ctx.source.properties)}"
            )
            log.warning("%s", why)
            self._producer = None
            return why

    def _prepare(self) -> None:
        """The source topic and its mirror, made the first time (both calls are no-ops after)."""
        ctx = self.ctx
        if kc.topic_partitions(ctx.source_admin, self.topic, ctx.source.alias) is None:
            future = ctx.source_admin.create_topics(
                [NewTopic(self.topic, num_partitions=1, replication_factor=-1, config=TOPIC_CONFIGS)],
                request_timeout=kc.REQUEST_TIMEOUT_S,
            )[self.topic]
            with kc.kafka_errors(
                f"creating '{self.topic}' on cluster '{ctx.source.alias}' failed",
                ignore={KafkaError.TOPIC_ALREADY_EXISTS},
            ):
                future.result()
        if ctx.naming.heartbeats_mirror_topic() not in ctx.registry():
            create_mirror(ctx, self.topic)


@dataclass(frozen=True)
class HeartbeatStatus:
    """What the mirror's newest heartbeat says, for `link describe`, metrics and the UI."""

    enabled: bool
    topic: str  # on the source
    mirror_topic: str  # on the destination
    interval_s: int
    newest_emitted_ms: int | None = None  # None: none has reached the mirror
    age_ms: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def sentence(self) -> str:
        if not self.enabled:
            return "off (emit.heartbeats.enabled)"
        if self.newest_emitted_ms is None or self.age_ms is None:  # set together
            return f"none has reached '{self.mirror_topic}' yet"
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.newest_emitted_ms / 1000))
        return (
            f"the newest on '{self.mirror_topic}' was written {self.age_ms / 1000:.1f}s ago ({when}); "
            f"one every {self.interval_s}s while following, and one per cycle"
        )


def heartbeat_status(ctx: LinkContext) -> HeartbeatStatus:
    """Read the newest heartbeat on the destination's heartbeats mirror (never the source)."""
    status = HeartbeatStatus(
        ctx.link.heartbeats_enabled,
        ctx.naming.internal_topic("heartbeats"),
        ctx.naming.heartbeats_mirror_topic(),
        ctx.link.heartbeats_interval_s,
    )
    if not status.enabled or not kc.topic_partitions(ctx.dest_admin, status.mirror_topic, ctx.dest.alias):
        return status
    emitted = _newest_timestamp(ctx.dest_conf("reader"), status.mirror_topic)
    if emitted is None:
        return status
    return replace(status, newest_emitted_ms=emitted, age_ms=max(0, int(time.time() * 1000) - emitted))


def _newest_timestamp(conf: dict, topic: str, timeout: float = 10.0) -> int | None:
    """The source timestamp of the mirror's last record; None while it has none."""
    cons = kc.consumer(conf)
    try:
        low, high = kc.watermark(cons, topic, 0)
    finally:
        cons.close()
    if high <= low:
        return None
    newest = list(committed_records(conf, topic, 0, high - 1, high, timeout))
    return newest[-1].timestamp()[1] if newest else None
