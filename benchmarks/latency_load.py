"""The latency benchmark's load and stopwatch: a paced producer on the source, an arrival tracker on the mirror.

Every record carries its phase and a sequence number in its key (`m0000000042`:
phase `m`, record 42), so the tracker counts loss and duplication exactly, per
phase:

- `w` warm-up: a trickle sent until the copier's first record arrives, then
  the steady load itself for a while (`latency.py --warm-seconds`), so neither
  a copier's start-up nor its first seconds at full rate land in a latency
  figure (the output says so);
- `m` measured: the steady load the latency figures come from;
- `b` burst: records produced as fast as possible, for a throughput figure.

Latency is the tracker's wall clock when the consumer hands it the record,
minus the record's timestamp (CreateTime), which the producer sets explicitly
from the same clock in the same process and the mirrors keep as they are.
Neither end adds a wait of its own: the producer lingers 1 ms at most, and the
tracker takes each record as soon as librdkafka has fetched it (see `Tracker`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from benchmarks.common import QUIET, say

WARM, MEASURED, BURST = b"w", b"m", b"b"
PHASES = (WARM, MEASURED, BURST)
KEY_DIGITS = 10

#: The steady load: a 1 ms linger adds at most 1 ms to a record's latency. librdkafka's default (5 ms) adds up
#: to 5 ms to every record (a delay of the load's, not of the copier's). The price, at 2,000 records/s over 8
#: partitions on the local broker: ~1,400 produce requests/s instead of ~870, ~0.08 cores more of `a`'s broker
#: (no linger at all: about the same as 1 ms).
PACED_PRODUCER = {"acks": "1", "linger.ms": 1, "compression.type": "none", "enable.idempotence": False}
#: The burst: the throughput benchmark's load settings (large batches), and delivery reports for failures only
#: (a Python callback per record would halve the producer's rate); every record not reported failed by the
#: time flush() returns with nothing left was acknowledged.
BURST_PRODUCER = {
    "acks": "1",
    "linger.ms": 20,
    "batch.size": 1000000,
    "batch.num.messages": 100000,
    "compression.type": "none",
    "enable.idempotence": False,
    "delivery.report.only.error": True,
    "queue.buffering.max.messages": 1000000,
    "queue.buffering.max.kbytes": 1048576,
}
#: The tracker: a fetch returns as soon as one record is there (fetch.min.bytes 1); the wait only bounds
#: an idle fetch. read_committed, like an application on the mirror: a transactional copy counts once committed.
#: fetch.queue.backoff.ms: should a burst fill librdkafka's local queue past its thresholds, fetch again after
#: 10 ms rather than the default 1 s, so the queue's limit never shows up as a gap in arrivals.
TRACKER_CONSUMER = {
    "fetch.wait.max.ms": 20,
    "fetch.min.bytes": 1,
    "isolation.level": "read_committed",
    "fetch.queue.backoff.ms": 10,
    "enable.auto.commit": False,
    "enable.partition.eof": False,
}
#: A consumer of every partition of a wide mirror leaves an entry per partition per fetch in the destination
#: broker's fetch purgatory until the partition is written again: at 10,000 partitions 5.2 million of them
#: filled a 2 GiB heap. Past this many partitions the tracker follows an evenly spread sample of them (every
#: `tracked_step`-th), and every figure is the sample's: the load is round robin, so a sample's records
#: are produced at the same rate and spacing as the rest.
MAX_TRACKED_PARTITIONS = 250
#: Records taken per wake-up of the tracker: `poll` waits for the first, a non-blocking `consume` takes the rest
#: already fetched. (`consume(n, timeout)` would wait until n records or the timeout: at 2,000 records/s a
#: `consume(2000, 0.05)` returns every 50 ms, which added 0-50 ms, ~25 ms on average, to every record.)
TRACKER_DRAIN = 2000


def tracked_step(spread: Spread) -> int:
    """The tracker follows the spread's partitions 0, step, 2 x step, ...: all of them up to
    MAX_TRACKED_PARTITIONS. Over many topics the step shares no factor with a topic's partition
    count, so the sample visits every partition number (a step of 40 over topics of 10 partitions
    followed partition 0 of every fourth topic)."""
    step = max(1, -(-spread.width // MAX_TRACKED_PARTITIONS))
    while not spread.narrow and math.gcd(step, spread.partitions) != 1:
        step += 1
    return step


def now_ms() -> float:
    return time.time() * 1000.0


class PhaseLog:
    """Per sequence number of one phase: copies seen, first arrival (ms), timestamp seen on the mirror."""

    GROW = 1 << 16

    def __init__(self) -> None:
        self.counts = bytearray()
        self.arrival = array("d")
        self.mirror_ts = array("q")
        self.distinct = 0
        self.copies = 0
        self.first_ms = self.last_ms = 0.0

    def _grow(self, seq: int) -> None:
        extra = seq + 1 - len(self.counts) + self.GROW
        self.counts.extend(bytes(extra))
        self.arrival.extend([0.0] * extra)
        self.mirror_ts.extend([0] * extra)

    def add(self, seq: int, ts: int, arrived: float) -> None:
        if seq >= len(self.counts):
            self._grow(seq)
        self.copies += 1
        self.last_ms = arrived
        if not self.first_ms:
            self.first_ms = arrived
        c = self.counts[seq]
        if c == 0:
            self.distinct += 1
            self.arrival[seq] = arrived
            self.mirror_ts[seq] = ts
        self.counts[seq] = min(c + 1, 255)


class SentLog:
    """Per sequence number of one phase: the timestamp given, and whether the source acknowledged it."""

    def __init__(self) -> None:
        self.ts = array("q")
        self.acked = bytearray()
        # When the source acknowledged each record (ms; 0: not yet), as this process saw the report:
        # a copier cannot read a record before the source holds it.
        self.acked_ms = array("d")
        self.failed = 0
        self.failed_seqs: set[int] = set()

    @property
    def sent(self) -> int:
        return len(self.ts)


@dataclass(frozen=True)
class Spread:
    """Where a load's records go: every partition of `topics` in turn (a topic's partitions, then the next's).

    Sequence number n goes to the (n mod width)-th of those partitions, so a sample of them
    (`tracked_step`) receives the same share of every phase.
    """

    topics: tuple[str, ...]
    partitions: int  # per topic

    @classmethod
    def of(cls, topic: str | Sequence[str], partitions: int) -> Spread:
        return cls((topic,) if isinstance(topic, str) else tuple(topic), partitions)

    @property
    def width(self) -> int:
        return len(self.topics) * self.partitions

    @property
    def narrow(self) -> bool:
        return len(self.topics) == 1

    def place(self, seq: int) -> tuple[str, int]:
        index = seq % self.width
        return self.topics[index // self.partitions], index % self.partitions


class Load:
    """One producer on the source topics for all three phases; delivery reports mark what the source holds."""

    def __init__(
        self, bootstrap: str, topic: str | Sequence[str], partitions: int, record_bytes: int, conf: dict | None = None
    ):
        self.spread = Spread.of(topic, partitions)
        self.body = os.urandom(max(0, record_bytes - KEY_DIGITS))
        self.logs = {phase: SentLog() for phase in PHASES}
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": "bench-latency-load",
                "logger": QUIET,
                **(conf or PACED_PRODUCER),
            }
        )
        # Connected, leaders known, before any clock starts.
        self.producer.list_topics(self.spread.topics[0] if self.spread.narrow else None, timeout=30)

    def _on_delivery(self, err, msg) -> None:
        key = msg.key()
        log = self.logs[key[:1]]
        if err is not None:
            log.failed += 1
            log.failed_seqs.add(int(key[1:]))
        else:
            log.acked[int(key[1:])] = 1
            log.acked_ms[int(key[1:])] = now_ms()

    def send(self, phase: bytes, seq: int | None = None) -> None:
        log = self.logs[phase]
        seq = log.sent if seq is None else seq
        ts = int(now_ms())
        log.ts.append(ts)
        log.acked.append(0)
        log.acked_ms.append(0.0)
        key = phase + b"%0*d" % (KEY_DIGITS, seq)
        topic, partition = self.spread.place(seq)
        while True:
            try:
                self.producer.produce(
                    topic,
                    key=key,
                    value=key[1:] + self.body,
                    partition=partition,
                    timestamp=ts,
                    on_delivery=self._on_delivery,
                )
                return
            except BufferError:  # only a burst fills the queue; wait for acknowledgements
                self.producer.poll(0.005)

    def warm_up(
        self, arrived: threading.Event, timeout_s: float, alive: Callable[[], bool], every_s: float = 0.2
    ) -> float | None:
        """Trickle warm-up records until `arrived` is set; seconds it took, None on timeout or once not `alive()`."""
        start = time.monotonic()
        while not arrived.is_set():
            if time.monotonic() - start > timeout_s or not alive():
                return None
            self.send(WARM)
            self.producer.poll(0)
            arrived.wait(every_s)
        self.producer.flush(30)
        return time.monotonic() - start

    def paced(
        self, rate: float, seconds: float, stop: threading.Event | None = None, phase: bytes = MEASURED
    ) -> dict[str, Any]:
        """`rate` records/s of `phase` for `seconds`, round robin over the partitions, in groups every ~5 ms.

        A record's timestamp is taken when it is produced, so a producer that falls
        behind its schedule does not inflate the latency; how far behind it fell is reported.
        The warm-up's steady part (`phase` WARM) goes on from the trickle's sequence numbers.
        """
        log = self.logs[phase]
        base = log.sent
        total = int(rate * seconds)
        group = max(1, int(rate * 0.005))
        start = time.monotonic()
        behind, behind_at = 0.0, 0.0
        while log.sent - base < total and not (stop and stop.is_set()):
            now = time.monotonic()
            done = log.sent - base
            due = min(total, int((now - start) * rate) + 1)
            if now - (start + done / rate) > behind:
                behind, behind_at = now - (start + done / rate), now - start
            while log.sent - base < due:
                self.send(phase)
            self.producer.poll(0)
            wake = start + min(total, log.sent - base + group) / rate
            time.sleep(max(0.0, wake - time.monotonic()))
        elapsed = time.monotonic() - start
        # Only the measured load waits for its acknowledgements here: the warm-up runs straight into it.
        left = self.producer.flush(60) if phase == MEASURED else len(self.producer)
        sent = log.sent - base
        return {
            "records": sent,
            "seconds": round(elapsed, 2),
            "rate": round(sent / max(elapsed, 1e-9), 1),
            "max_behind_schedule_ms": round(behind * 1000, 1),
            "max_behind_at_s": round(behind_at, 1),
            "unacknowledged": left,
            "failed": log.failed,
        }

    def burst(self, n: int) -> dict[str, Any]:
        """`n` burst records as fast as this producer goes; seconds from first produce to last acknowledgement."""
        start = time.monotonic()
        for _ in range(n):
            self.send(BURST)
            if not self.logs[BURST].sent & 1023:
                self.producer.poll(0)
        left = self.producer.flush(300)
        elapsed = time.monotonic() - start
        log = self.logs[BURST]
        if not left:  # failure-only reports: everything else was acknowledged
            log.acked[:] = b"\x01" * log.sent
            for seq in log.failed_seqs:
                log.acked[seq] = 0
        return {
            "records": n,
            "seconds": round(elapsed, 2),
            "rate": round(n / max(elapsed, 1e-9), 1),
            "unacknowledged": left,
            "failed": self.logs[BURST].failed,
        }

    def await_acks(self, timeout_s: float) -> int:
        """Wait for the acknowledgements the source still owes; how many it still owes after `timeout_s`."""
        return self.producer.flush(timeout_s)

    def close(self) -> None:
        self.producer.flush(30)


class Tracker(threading.Thread):
    """A consumer on the mirror topics, from their beginning, logging each record's arrival.

    It waits for the topics to exist (MM2 creates its remote topics itself). `topic` is one
    topic or the mirrors of a Spread's topics, in the same order.
    """

    def __init__(self, bootstrap: str, topic: str | Sequence[str], partitions: int):
        self.spread = Spread.of(topic, partitions)
        self.topic = self.spread.topics[0]
        super().__init__(name=f"tracker-{self.topic}", daemon=True)
        self.bootstrap, self.partitions = bootstrap, self.spread.width
        self.step = tracked_step(self.spread)
        self.logs = {phase: PhaseLog() for phase in PHASES}
        self.first_arrival = threading.Event()
        self.stopping = threading.Event()
        self.error: str | None = None
        self.foreign = 0  # records whose key is not ours (none expected)

    def run(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-latency-{self.topic}",
                "logger": QUIET,
                **TRACKER_CONSUMER,
            }
        )
        try:
            if self._wait_for_topic(c):
                c.assign([TopicPartition(*self.spread.place(i), OFFSET_BEGINNING) for i in self.tracked_partitions()])
                self._consume(c)
        except Exception as exc:  # noqa: BLE001 - reported with the results, never a silent stop
            self.error = f"{type(exc).__name__}: {exc}"
            say(f"tracker on b:{self.topic} stopped: {self.error}")
        finally:
            c.close()

    def _wait_for_topic(self, c: Consumer) -> bool:
        spread = self.spread
        while not self.stopping.is_set():
            found = c.list_topics(spread.topics[0] if spread.narrow else None, timeout=30).topics
            metas = [found.get(t) for t in spread.topics]
            if all(m is not None and m.error is None and len(m.partitions) == spread.partitions for m in metas):
                return True
            time.sleep(0.2)
        return False

    def _consume(self, c: Consumer) -> None:
        logs = self.logs
        while not self.stopping.is_set():
            first = c.poll(0.05)  # returns as soon as a record has been fetched
            if first is None:
                continue
            msgs = [first, *c.consume(TRACKER_DRAIN, 0)]  # and whatever else was fetched by now, without waiting
            arrived = now_ms()  # one stamp per wake-up, after the drain: never early
            for m in msgs:
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(m.error().str())
                    continue
                key = m.key() or b""
                log = logs.get(key[:1])
                if log is None:
                    self.foreign += 1
                    continue
                log.add(int(key[1:]), m.timestamp()[1], arrived)
            if msgs:
                self.first_arrival.set()

    def tracked_partitions(self) -> range:
        """The followed partitions, as indexes into the Spread's (a single topic's: its partitions)."""
        return range(0, self.partitions, self.step)

    def tracked(self, records: int) -> np.ndarray:
        """Per sequence number of a phase's first `records`: whether its partition is followed (seq %
        width is the load's partition, `Spread.place`)."""
        return (np.arange(records) % self.partitions) % self.step == 0

    def arrived_all(self, load: Load, phase: bytes) -> bool:
        """Whether every followed record of `phase` the source acknowledged has arrived (a cheap count first)."""
        sent, seen = load.logs[phase], self.logs[phase]
        acked = np.frombuffer(bytes(sent.acked), dtype=np.uint8).astype(bool) & self.tracked(sent.sent)
        if seen.distinct < int(acked.sum()):
            return False
        counts = np.frombuffer(bytes(seen.counts[: sent.sent]).ljust(sent.sent, b"\0"), dtype=np.uint8)
        return bool((counts[acked] > 0).all())

    def wait_all(self, load: Load, phase: bytes, timeout_s: float, alive=lambda: True) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive() and self.error is None:
            if self.arrived_all(load, phase):
                return True
            time.sleep(0.2)
        return self.arrived_all(load, phase)

    def stop(self, linger_s: float = 0.0) -> None:
        """Stop after `linger_s` more seconds of listening (late duplicates are counted too)."""
        time.sleep(linger_s)
        self.stopping.set()
        self.join(30)


# --- figures -----------------------------------------------------------------------


def phase_stats(load: Load, tracker: Tracker, phase: bytes, window_s: float = 10.0) -> dict[str, Any]:
    """Latency (first arrival of each record), loss and duplication of one phase.

    lost: acknowledged by the source, never seen on the mirror. duplicated: copies
    beyond the first. The timeline groups records by production time in
    `window_s` windows; `gaps` are the stretches with no arrival at all.
    """
    sent, seen = load.logs[phase], tracker.logs[phase]
    n = sent.sent
    if not n:
        return {"sent": 0, "received": seen.distinct}
    counts = np.frombuffer(bytes(seen.counts[:n]).ljust(n, b"\0"), dtype=np.uint8)
    acked = np.frombuffer(bytes(sent.acked), dtype=np.uint8).astype(bool) & tracker.tracked(n)
    ts = np.frombuffer(sent.ts, dtype=np.int64)
    got = counts > 0
    arrival = np.frombuffer(seen.arrival, dtype=np.float64)[:n][got[: len(seen.arrival)]]
    latency = arrival - ts[got]
    out: dict[str, Any] = {
        "sent": n,
        "acked": int(acked.sum()),
        "received": int(got.sum()),
        "lost": int((acked & ~got).sum()),
        "duplicated": int(counts.sum()) - int(got.sum()),
        "unexpected": max(0, seen.distinct - int(got.sum())),  # arrivals with a sequence number never sent
        "tracked_partitions": len(tracker.tracked_partitions()),
        "partitions": tracker.partitions,
        "timestamp_changed": int(
            (np.frombuffer(seen.mirror_ts, dtype=np.int64)[:n][got[: len(seen.mirror_ts)]] != ts[got]).sum()
        ),
    }
    if not len(latency):
        return out
    p50, p90, p99 = np.percentile(latency, [50, 90, 99], method="inverted_cdf")
    out.update(
        {
            "p50_ms": round(float(p50), 1),
            "p90_ms": round(float(p90), 1),
            "p99_ms": round(float(p99), 1),
            "max_ms": round(float(latency.max()), 1),
            "min_ms": round(float(latency.min()), 1),
            "mean_ms": round(float(latency.mean()), 1),
        }
    )
    source = np.frombuffer(sent.acked_ms, dtype=np.float64)[:n]
    reported = source > 0  # a burst's records are marked acknowledged without a report each
    if reported.any():
        q50, q99 = np.percentile(source[reported] - ts[reported], [50, 99], method="inverted_cdf")
        out.update({"source_ack_p50_ms": round(float(q50), 1), "source_ack_p99_ms": round(float(q99), 1)})
        # The replicator's own share when the source is slow to take the load: from the report of a
        # record's acknowledgement (in this process) to its arrival on the mirror.
        arrival_by_seq = np.zeros(n)
        arrival_by_seq[got] = arrival
        both = reported & got
        if both.any():
            a50, a99 = np.percentile(arrival_by_seq[both] - source[both], [50, 99], method="inverted_cdf")
            out.update({"after_ack_p50_ms": round(float(a50), 1), "after_ack_p99_ms": round(float(a99), 1)})
    out["timeline"] = _timeline(ts[got] - ts[0], latency, window_s)
    out["slowest"] = _around_slowest(ts[got] - ts[0], latency)
    out["gaps"] = _arrival_gaps(arrival, float(ts[0]))
    return out


def _timeline(produced_ms: np.ndarray, latency: np.ndarray, window_s: float) -> list[dict[str, float]]:
    """Per window of production time: records, median, p99 and max latency."""
    bins = (produced_ms // (window_s * 1000)).astype(np.int64)
    rows = []
    for b in np.unique(bins):
        lat = latency[bins == b]
        rows.append(
            {
                "from_s": round(float(b * window_s), 1),
                "records": int(len(lat)),
                "p50_ms": round(float(np.median(lat)), 1),
                "p99_ms": round(float(np.percentile(lat, 99, method="inverted_cdf")), 1),
                "max_ms": round(float(lat.max()), 1),
            }
        )
    return rows


def _around_slowest(
    produced_ms: np.ndarray, latency: np.ndarray, before_ms: int = 1500, after_ms: int = 500, step_ms: int = 100
) -> dict[str, Any]:
    """The most latency per `step_ms` of production time around the slowest record (None: none produced
    then). It tells a copier slow already before that record (short of CPU) from a pause at it."""
    at = float(produced_ms[int(latency.argmax())])
    start = max(0.0, (at - before_ms) // step_ms * step_ms)
    near = (produced_ms >= start) & (produced_ms < at + after_ms)
    steps = ((produced_ms[near] - start) // step_ms).astype(np.int64)
    worst = [latency[near][steps == i] for i in range(int(steps.max()) + 1)]
    return {
        "at_s": round(at / 1000, 2),
        "from_s": round(start / 1000, 2),
        "step_ms": step_ms,
        "max_ms": [round(float(w.max())) if len(w) else None for w in worst],
    }


def _arrival_gaps(arrival: np.ndarray, ref_ms: float, at_least_ms: float = 1000.0) -> dict[str, Any]:
    """Stretches of at least `at_least_ms` without a single arrival; `at_s` from `ref_ms` (the load's start)."""
    if len(arrival) < 2:
        return {"count": 0, "longest_ms": 0.0, "total_s": 0.0, "at_s": []}
    ordered = np.sort(arrival)
    gaps = np.diff(ordered)
    long = np.flatnonzero(gaps >= at_least_ms)
    return {
        "count": int(len(long)),
        "longest_ms": round(float(gaps.max()), 1),
        "total_s": round(float(gaps[long].sum()) / 1000, 1),
        "at_s": [[round(float(ordered[i] - ref_ms) / 1000, 1), round(float(gaps[i]) / 1000, 1)] for i in long],
    }


def arrival_rate(tracker: Tracker, phase: bytes) -> dict[str, Any]:
    """Records/s of a phase from its first to its last arrival (copies counted once)."""
    log = tracker.logs[phase]
    span = (log.last_ms - log.first_ms) / 1000
    return {
        "records": log.distinct,
        "first_to_last_s": round(span, 2),
        "records_per_s": round(log.distinct / span, 1) if span > 0 else None,
    }
