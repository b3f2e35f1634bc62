"""One round's records on their way to the mirrors (step 3 of `group_copy`): produced part by
part, each before its deadline, then acknowledged or not as a whole.

A round is sent in two goes (the parts under their reservation first, then
those its transactions announced): `RoundSending` gathers both, so that the
round waits once for every record it produced.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError

from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import reservations
from mirror_pipeline.replication.chunks import ProducerSet, chunk_timestamps, produce_chunk, timestamp_of
from mirror_pipeline.replication.group_reading import Member
from mirror_pipeline.replication.task_clients import Failures
from mirror_pipeline.replication.throttling import ThrottleWatch

# A record's delivery errors that say nothing against trying again: it timed out or was purged
# (and may still have been written). Any other error refused it, and would again.
IN_DOUBT = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._PURGE_QUEUE,
        KafkaError._PURGE_INFLIGHT,
    }
)


class RoundSending:
    def __init__(self, out: ProducerSet, delivery_timeout_ms: int, land_by: float) -> None:
        self.out, self.delivery_timeout_ms = out, delivery_timeout_ms
        self.land_by = land_by  # the round's own deadline
        self.flush_by = land_by  # the earliest deadline of the parts sent
        self.produced: list[Member] = []
        self.stamps: dict[int, list[tuple[int, int]]] = {}  # by id(part): its records' timestamps
        self.missed: list[tuple[Member, str, bool]] = []  # see `land`

    def send(self, parts: list[Member]) -> None:
        """Produce each part's round, unless its deadline has passed (then it is `missed`)."""
        for part in parts:
            # Checked before each partition's records: a task stalled past the deadline (between
            # two partitions, say) sends none after it; a repair may have settled them meanwhile.
            if time.monotonic() >= (deadline := reservations.deadline(part, self.land_by)):
                late = f"a round's records were not sent within {self.delivery_timeout_ms} ms of announcing them"
                # None of this round's was sent, but its reservation's last round may not have landed yet.
                self.missed.append((part, f"{late}; none was sent after", True))
                continue
            self.flush_by = min(self.flush_by, deadline)
            self.stamps[id(part)] = list(map(timestamp_of, part.chunk))
            chunk_ts = chunk_timestamps(self.stamps[id(part)])[0]
            out = self.out.of(part.unit.mirror_topic, part.unit.partition)
            produce_chunk(out, part.unit.mirror_topic, part.unit.partition, part.chunk, chunk_ts)
            self.produced.append(part)

    def land(
        self, runs: dict[int, tuple[tuple[int, int], ...]], failures: Failures, throttles: ThrottleWatch
    ) -> list[tuple[Member, str, bool]]:
        """Wait for every record sent; each part produced lands (its records' `runs`, by id), unless
        any of the round's records was not acknowledged in time or one of its own failed. Returns the
        parts that did not land: (part, why, whether its records are in doubt rather than refused)."""
        remaining = self.out.land_by(self.flush_by)
        acked_ms = int(time.time() * 1000)
        missed = self.missed
        for part in self.produced:
            key = (part.unit.mirror_topic, part.unit.partition)
            if remaining or key in failures:
                if remaining:
                    reason = f"{remaining} records not acknowledged within {self.delivery_timeout_ms} ms"
                else:
                    reason = failures[key].str()
                in_doubt = bool(remaining) or failures[key].code() in IN_DOUBT
                missed.append((part, f"writing failed: {reason}{throttles.why_late()}", in_doubt))
                continue
            part.landed(Segment(part.dest_end, runs[id(part)], part.position).dest_end, self.stamps[id(part)], acked_ms)
        return missed
