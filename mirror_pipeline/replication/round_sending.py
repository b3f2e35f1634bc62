"""One round's records on their way to the mirrors (step 3 of `group_copy`): produced part by
part, each before its deadline, then acknowledged or not as a whole.

A round is sent in two goes (the parts under their reservation first, then
those its transactions announced): `RoundSending` gathers both, so that the
round waits once for every record it produced.
"""

from __future__ import annotations

import time

from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.replication import reservations
from mirror_pipeline.replication.chunks import ProducerSet, chunk_timestamps, produce_chunk, timestamp_of
from mirror_pipeline.replication.group_reading import Member, RoundReader
from mirror_pipeline.replication.task_clients import Failures
from mirror_pipeline.replication.throttling import ThrottleWatch


class RoundSending:
    def __init__(self, out: ProducerSet, rounds: RoundReader, delivery_timeout_ms: int, land_by: float) -> None:
        self.out, self.rounds, self.delivery_timeout_ms = out, rounds, delivery_timeout_ms
        self.land_by = land_by  # the round's own deadline
        self.flush_by = land_by  # the earliest deadline of the parts sent
        self.produced: list[Member] = []
        self.stamps: dict[int, list[tuple[int, int]]] = {}  # by id(part): its records' timestamps

    def send(self, parts: list[Member]) -> None:
        """Produce each part's round, unless its deadline has passed (then the part stops)."""
        for part in parts:
            # Checked before each partition's records: a task stalled past the deadline (between
            # two partitions, say) sends none after it; a repair may have settled them meanwhile.
            if time.monotonic() >= (deadline := reservations.deadline(part, self.land_by)):
                self.rounds.stop(
                    part,
                    MirrorError.__name__,
                    f"a round's records were not sent within {self.delivery_timeout_ms} ms of announcing "
                    f"them; none was sent after",
                )
                continue
            self.flush_by = min(self.flush_by, deadline)
            self.stamps[id(part)] = list(map(timestamp_of, part.chunk))
            chunk_ts = chunk_timestamps(self.stamps[id(part)])[0]
            out = self.out.of(part.unit.mirror_topic, part.unit.partition)
            produce_chunk(out, part.unit.mirror_topic, part.unit.partition, part.chunk, chunk_ts)
            self.produced.append(part)

    def land(self, runs: dict[int, tuple[tuple[int, int], ...]], failures: Failures, throttles: ThrottleWatch) -> None:
        """Wait for every record sent; each part produced lands (its records' `runs`, by id), or
        stops if any of the round's records was not acknowledged in time or one of its own failed."""
        remaining = self.out.land_by(self.flush_by)
        acked_ms = int(time.time() * 1000)
        for part in self.produced:
            key = (part.unit.mirror_topic, part.unit.partition)
            if remaining or key in failures:
                reason = (
                    f"{remaining} records not acknowledged within {self.delivery_timeout_ms} ms"
                    if remaining
                    else failures[key].str()
                )
                self.rounds.stop(part, MirrorError.__name__, f"writing failed: {reason}{throttles.why_late()}")
                continue
            part.landed(Segment(part.dest_end, runs[id(part)], part.position).dest_end, self.stamps[id(part)], acked_ms)
