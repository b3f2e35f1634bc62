"""Whether the link's source principal may READ topics, asked with one Fetch per topic (R-MT-1, R-AC-3, R-LC-5).

Metadata and ListOffsets need only DESCRIBE on a topic, so a principal that
may describe a topic but not read it passed every check of `mirror create`
and every plan of a cycle; only a copy task found out, and a mirror with no
lag was never noticed at all. A Fetch is authorized for READ even when it
returns nothing: one consumer with the link's source settings is assigned
partition 0 of every topic at its end, and each partition answers either
with its end (readable) or with TOPIC_AUTHORIZATION_FAILED (not readable).
The topics are shared among a few clients side by side (`topic_shares`);
none when no topic is asked.

A topic neither answer arrives for within the timeout is *unanswered*: a
cycle treats it as no evidence either way (a leader moving, say), `create`
refuses it rather than create a mirror it could not show to be readable.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_END, KafkaError, TopicPartition

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka import topic_shares
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorRefused

# How long the probe waits for every topic's Fetch answer.
READ_PROBE_S = 10.0
# An empty Fetch is otherwise held by the broker for `fetch.wait.max.ms` (500 ms by default),
# waiting for records to arrive; the probe only needs the answer.
_PROBE_SETTINGS = {"enable.partition.eof": True, "fetch.wait.max.ms": 10}
# How long one consume call of the probe waits before it looks whether every topic answered.
PROBE_POLL_S = 0.02
# SASL mechanisms whose principal is `User:<sasl.username>` under Kafka's default principal builder.
_USERNAME_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class ReadProbe:
    """What one probe found: topics the principal may not read (and why), and topics that did not answer."""

    denied: dict[str, str] = field(default_factory=dict)
    unanswered: list[str] = field(default_factory=list)


def probe(ctx: LinkContext, topics: Iterable[str], timeout: float = READ_PROBE_S) -> ReadProbe:
    """Fetch once from partition 0 of every topic with the link's source credentials (see the module)."""
    asked = sorted(set(topics))
    # On 1,000 topics of 10 partitions one consumer took 0.6-0.9 s, four side by side 0.4-0.5 s.
    consumers = topic_shares.consumers_for(len(asked))
    if consumers == 1:
        return _probe_with_one(ctx, asked, timeout)
    with ThreadPoolExecutor(consumers, thread_name_prefix="read-probe") as pool:
        shares = pool.map(
            lambda share: _probe_with_one(ctx, share, timeout), [asked[i::consumers] for i in range(consumers)]
        )
        found = ReadProbe()
        for share in shares:
            found.denied.update(share.denied)
            found.unanswered += share.unanswered
    found.unanswered.sort()
    return found


def _probe_with_one(ctx: LinkContext, topics: Iterable[str], timeout: float) -> ReadProbe:
    """`probe` of `topics` through one consumer."""
    waiting = set(topics)
    found = ReadProbe()
    if not waiting:
        return found
    cons = kc.consumer(ctx.source_conf("reader", **_PROBE_SETTINGS))
    try:
        with kc.kafka_errors(f"cluster '{ctx.source.alias}': probing whether the link may read its topics failed"):
            # Every plan of a cycle waits on the probe: without this its first Fetch waited on a
            # librdkafka timer (0.6 s to the first answer; 30 ms with it).
            kc.learn_cluster(cons, next(iter(waiting)) if len(waiting) == 1 else None)
            cons.assign([TopicPartition(t, 0, OFFSET_END) for t in sorted(waiting)])
            deadline = time.monotonic() + timeout
            while waiting and time.monotonic() < deadline:
                # consume(n, timeout) returns only at n messages or its timeout (0.2 s held every probe).
                for msg in cons.consume(1000, PROBE_POLL_S):
                    err, topic = msg.error(), msg.topic()
                    if topic not in waiting:
                        continue
                    if err is None or err.code() == KafkaError._PARTITION_EOF:
                        waiting.discard(topic)  # fetched (a record, or the end): READ is granted
                    elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        waiting.discard(topic)
                        found.denied[topic] = _denied(ctx, topic)
                    # Any other error is one librdkafka retries (a leader moving): wait for the answer.
    finally:
        cons.close()
    found.unanswered = sorted(waiting)
    return found


def refusals(ctx: LinkContext, topics: Iterable[str]) -> dict[str, MirrorRefused]:
    """The error `create` refuses each topic with that the link cannot be shown to read (one probe for all)."""
    found = probe(ctx, topics)
    alias = ctx.source.alias
    out = {t: MirrorRefused(cannot_read(ctx, t, why)) for t, why in found.denied.items()}
    for t in found.unanswered:
        out[t] = MirrorRefused(
            f"source topic '{t}' on cluster '{alias}': no Fetch answer within "
            f"{READ_PROBE_S:.0f}s, so the link's credentials could not be shown to read it; "
            f"nothing was created, try again"
        )
    return out


def cannot_read(ctx: LinkContext, topic: str, why: str) -> str:
    """The whole sentence for a topic the probe found the link may not read (`why` from `denied`)."""
    return f"source topic '{topic}' on cluster '{ctx.source.alias}' cannot be read with the link's credentials: {why}"


def _denied(ctx: LinkContext, topic: str) -> str:
    """Why a Fetch was refused, for an operator: who is refused, and the right to grant."""
    principal = source_principal(ctx)
    who = f"the link's source principal {principal}" if principal else "the link's source principal"
    return (
        f"{who} may see topic '{topic}' but not read it (TOPIC_AUTHORIZATION_FAILED on a Fetch: "
        f"it needs READ on the topic, not only DESCRIBE; `mirror-pipeline link acls {ctx.link.name} "
        f"--topic {topic}` lists every right the link needs)"
    )


def source_principal(ctx: LinkContext) -> str | None:
    """`User:<sasl.username>` where the source settings say so (SASL PLAIN/SCRAM); else None (not told)."""
    props = ctx.source.properties
    mechanism = str(props.get("sasl.mechanism", props.get("sasl.mechanisms", ""))).upper()
    username = props.get("sasl.username")
    if (
        str(props.get("security.protocol", "")).upper().startswith("SASL")
        and mechanism in _USERNAME_MECHANISMS
        and username
    ):
        return f"User:{username}"
    return None
