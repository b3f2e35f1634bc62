#!/usr/bin/env python
"""Offset-translation benchmark: where lagging consumer groups land on the mirror after a failover.

    .venv/bin/python benchmarks/translation.py [--records N] [--skip-mm2] [--json-file PATH] ...

Starts its own pair of local single-node clusters (`.local-kafka/bench-translation`,
ports 19992/29992, away from the demo's 19092, the tests' 11592 and the
throughput benchmark's 19892), then, for three one-partition source topics:

- gap-free      -- N plain records;
- compacted     -- N records of which every 50th reuses one of 200 "hot"
                   keys, compaction forced (small segments, low dirty ratio),
                   so the log has ~18,000 holes all along it (denser holes
                   make the engine's offset map outgrow one Kafka message:
                   see benchmarks/README.md);
- transactional -- records in transactions of 500, every 4th transaction
                   aborted, until N records are committed: aborted data and
                   commit/abort markers leave gaps in the visible offsets;

1. mirrors the three topics with the engine (`engine.create_mirror`, then
   `engine.run_cycle` until the lag is 0);
2. commits source consumer groups at 0, 1, 100, 1,000, 10,000, 100,000 and
   500,000 records behind each topic's log end (one group per lag, topic and
   translation mode);
3. syncs offsets (`engine.sync_offsets`) in `exact` mode and, for a second
   set of groups, in `timestamp` mode, then fails the mirrors over
   (`engine.failover`), and reads where each group now sits on the mirror;
4. optionally (on by default) runs MirrorMaker 2 over the same source topics
   with its checkpoint connector syncing a third set of groups
   (`sync.group.offsets.enabled=true`) and reads where it put them;
5. prints, per topic, lag and method, how many records each group re-reads
   (it landed before the right place) or skips (after it).

Ground truth: a group whose committed source offset is c must resume at the
first record the source holds at offset >= c (the first visible one:
read_committed). Every record's value starts with a unique sequence number,
so that record is found on the mirror (and on MM2's copy) by its value, and
the re-read / skip counts are counted in records on the copy, not in offsets.

Timestamps are explicit and realistic for a busy producer: 50 records share
each millisecond (`--records-per-ms`), which is where timestamp translation
cannot tell records apart.

It stops the clusters and deletes their storage at the end unless
`--keep-clusters`. Progress goes to stderr; the Markdown table to stdout.
See benchmarks/README.md ("Offset translation").
"""

from __future__ import annotations

import argparse
import bisect
import gc
import json
import logging
import sys
import time
import uuid
from array import array
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(REPO))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from benchmarks.common import (  # noqa: E402
    MM2_SINGLE_NODE,
    QUIET,
    admin_for,
    create_topic,
    end_offsets,
    local_clusters,
    log_tail,
    mm2_class_present,
    mm2_properties_text,
    say,
    start_mm2,
    stop_mm2,
    warm_up,
)
from mirror_pipeline import engine  # noqa: E402
from mirror_pipeline.config.loader import parse_config  # noqa: E402

BENCH_ROOT = REPO / ".local-kafka" / "bench-translation"
#: MM2's properties and log of the latest run; outside BENCH_ROOT so they outlive the wiped storage.
MM2_DIR = REPO / ".local-kafka" / "bench-translation-mm2"
BASE_PORT = 19992
LINK = "a-to-b"
KINDS = ("gap-free", "compacted", "transactional")
LAGS = (0, 1, 100, 1_000, 10_000, 100_000, 500_000)
METHODS = ("exact", "timestamp", "mm2")
SEQ_DIGITS = 10  # a value starts with its sequence number, zero-padded

PRODUCER = {
    "acks": "1",
    "linger.ms": 20,
    "batch.size": 1000000,
    "batch.num.messages": 100000,
    "compression.type": "none",
    "queue.buffering.max.messages": 1000000,
    "queue.buffering.max.kbytes": 1048576,
}
COMPACTED_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": str(1024 * 1024),  # ~7,000 records a segment: all but the tail is cleanable
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
}


# --- the source topics ----------------------------------------------------------


class Records:
    """Values that start with a unique sequence number; timestamps `per_ms` to a millisecond."""

    def __init__(self, record_bytes: int, per_ms: int, base_ms: int):
        self.filler = b"x" * max(0, record_bytes - SEQ_DIGITS)
        self.per_ms = per_ms
        self.base_ms = base_ms

    def value(self, seq: int) -> bytes:
        return b"%010d" % seq + self.filler

    def timestamp(self, seq: int) -> int:
        return self.base_ms + seq // self.per_ms


def _producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "logger": QUIET, **PRODUCER, **extra})


def _send(p: Producer, topic: str, key: bytes, value: bytes, ts: int, failures: list) -> None:
    while True:
        try:
            p.produce(
                topic,
                key=key,
                value=value,
                partition=0,
                timestamp=ts,
                on_delivery=lambda err, _m: failures.append(err) if err else None,
            )
            return
        except BufferError:
            p.poll(0.005)


def produce_plain(bootstrap: str, topic: str, n: int, recs: Records, hot_every: int = 0, hot_keys: int = 1) -> None:
    """n records; with `hot_every`, every hot_every-th record reuses one of `hot_keys` keys."""
    failures: list = []
    p = _producer(bootstrap)
    for seq in range(n):
        if hot_every and seq % hot_every == 0:
            key = b"hot-%06d" % ((seq // hot_every) % hot_keys)
        else:
            key = b"k%09d" % seq
        _send(p, topic, key, recs.value(seq), recs.timestamp(seq), failures)
        if not seq & 1023:
            p.poll(0)
        if failures:
            break
    if p.flush(300) or failures:
        raise RuntimeError(f"producing to {topic} failed: {failures[0].str() if failures else 'unacknowledged'}")


def produce_transactional(
    bootstrap: str, topic: str, committed: int, recs: Records, tx_records: int, abort_every: int
) -> int:
    """Transactions of `tx_records` until `committed` records are committed, every
    `abort_every`-th transaction aborted; returns how many records were written in all."""
    p = _producer(
        bootstrap,
        **{"transactional.id": f"bench-translation-{uuid.uuid4().hex[:8]}", "enable.idempotence": True, "acks": "all"},
    )
    p.init_transactions(60)
    failures: list = []
    seq = done = tx = 0
    while done < committed:
        count = min(tx_records, committed - done)
        abort = abort_every and tx % abort_every == abort_every - 1
        p.begin_transaction()
        for _ in range(count):
            _send(p, topic, b"k%09d" % seq, recs.value(seq), recs.timestamp(seq), failures)
            seq += 1
        if abort:
            # Flushed first, so the aborted records reach the log (abort alone may purge them unsent).
            p.flush(60)
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            done += count
        tx += 1
        if failures:
            raise RuntimeError(f"producing to {topic} failed: {failures[0].str()}")
    return seq


def read_partition(bootstrap: str, topic: str) -> tuple[array, array]:
    """(offsets, sequence numbers) of every visible record of partition 0 (read_committed)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            "logger": QUIET,
        }
    )
    offsets, seqs = array("q"), array("q")
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        tp = TopicPartition(topic, 0, 0)
        c.assign([tp])
        deadline = time.monotonic() + 600
        while True:
            for msg in c.consume(10000, 0.5):
                if msg.error():
                    raise RuntimeError(f"reading {topic}: {msg.error().str()}")
                offsets.append(msg.offset())
                seqs.append(int(msg.value()[:SEQ_DIGITS]))
            (pos,) = c.position([tp])
            if pos.offset >= high:
                return offsets, seqs
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading {topic}: at offset {pos.offset} of {high} after 600 s")
    finally:
        c.close()


def wait_for_compaction(bootstrap: str, topic: str, end: int, timeout_s: float) -> float:
    """Seconds until the log cleaner has punched holes near the end of the cleanable part.

    The cleaner cleans from the log start to the active segment in one pass,
    so holes a few segments before the end mean the whole pass is done. (Hot
    keys come round every hot_every x hot_keys records: keep that well under
    30,000, or the probed records have no later duplicate to be removed by.)
    """
    start = time.monotonic()
    probe = max(0, end - 30_000)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-probe-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "logger": QUIET,
        }
    )
    try:
        while True:
            c.assign([TopicPartition(topic, 0, probe)])
            seen: list[int] = []
            while len(seen) < 5000:
                batch = c.consume(5000, 2.0)
                if not batch:
                    break
                seen += [m.offset() for m in batch if not m.error()]
            holes = sum(1 for a, b in pairwise(seen) if b != a + 1)
            if holes:
                return time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                raise RuntimeError(f"{topic}: no compaction after {timeout_s:.0f} s")
            time.sleep(2)
    finally:
        c.close()


def commit_group(bootstrap: str, group: str, topic: str, offset: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "logger": QUIET})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def committed_offsets(bootstrap: str, groups: dict[str, str]) -> dict[str, int | None]:
    """group -> committed offset of partition 0 of groups[group] (None: nothing committed)."""
    out: dict[str, int | None] = {}
    for group, topic in groups.items():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "logger": QUIET})
        try:
            (tp,) = c.committed([TopicPartition(topic, 0)], timeout=30)
            out[group] = tp.offset if tp.offset >= 0 else None
        finally:
            c.close()
    return out


# --- scoring --------------------------------------------------------------------


class Truth:
    """Where a group with committed source offset c must resume on a copy."""

    def __init__(self, source: tuple[array, array], copy: tuple[array, array]):
        self.src_offsets, self.src_seqs = source
        self.copy_offsets, self.copy_seqs = copy

    def right_index(self, committed: int) -> int:
        """Index, among the copy's records, of the first one the group must read."""
        i = bisect.bisect_left(self.src_offsets, committed)
        if i == len(self.src_offsets):
            return len(self.copy_offsets)  # read everything: nothing left to read
        return bisect.bisect_left(self.copy_seqs, self.src_seqs[i])

    def right_offset(self, committed: int) -> int | None:
        j = self.right_index(committed)
        return self.copy_offsets[j] if j < len(self.copy_offsets) else None

    def score(self, committed: int, landed: int | None) -> dict[str, Any]:
        """Records re-read (landed before the right record) or skipped (after it), counted on the copy."""
        if landed is None:
            return {"landed": None, "right": self.right_offset(committed), "reread": None, "skipped": None}
        right = self.right_index(committed)
        at = bisect.bisect_left(self.copy_offsets, landed)
        return {
            "landed": landed,
            "right": self.right_offset(committed),
            "reread": max(0, right - at),
            "skipped": max(0, at - right),
        }


# --- the engine's run -------------------------------------------------------------


def link_config(a: str, b: str, mode: str, group_prefix: str):
    return parse_config(
        {
            "clusters": {"a": {"bootstrap.servers": a}, "b": {"bootstrap.servers": b}},
            "links": {
                LINK: {
                    "source": "a",
                    "destination": "b",
                    "mirror.unit.max.bytes": 4 * 1024**3,
                    "consumer.offset.sync.enable": True,
                    "consumer.offset.group.filters": {
                        "groupFilters": [{"name": group_prefix, "patternType": "PREFIXED"}]
                    },
                    "offset.translation.mode": mode,
                }
            },
            "spark": {"master": "local[2]"},
        },
        "bench",
    )


def mirror_all(cfg, topics: list[str], max_cycles: int = 20) -> None:
    from mirror_pipeline.replication.spark_runner import spark_session

    for topic in topics:
        engine.create_mirror(cfg, LINK, topic)
    spark = spark_session(cfg.spark)
    try:
        for n in range(1, max_cycles + 1):
            t0 = time.perf_counter()
            result = engine.run_cycle(cfg, LINK, spark, mirrors=topics)
            say(
                f"mirror: cycle {n}: {result.records:,} records in {time.perf_counter() - t0:.1f}s, "
                f"lag after {result.lag_after}"
            )
            if result.lag_after == 0:
                return
        raise RuntimeError(f"mirrors still lag after {max_cycles} cycles")
    finally:
        spark.stop()


# --- MirrorMaker 2 ------------------------------------------------------------------


def mm2_settings(a: str, b: str, topics: list[str], group_regex: str) -> dict[str, str]:
    return {
        "clusters": "src, dst",
        "src.bootstrap.servers": a,
        "dst.bootstrap.servers": b,
        "src->dst.enabled": "true",
        "src->dst.topics": "|".join(topics),
        "src->dst.groups": group_regex,
        "dst->src.enabled": "false",
        **MM2_SINGLE_NODE,
        "tasks.max": "2",
        "sync.topic.acls.enabled": "false",
        # Copy what a read_committed consumer sees, like the engine (aborted data stays behind).
        "src.consumer.isolation.level": "read_committed",
        "source.consumer.isolation.level": "read_committed",
        # The checkpoint connector, as quick as it goes: the product compared with.
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "2",
    }


def run_mm2(
    a: str,
    b: str,
    topics: list[str],
    groups: dict[str, str],
    visible: dict[str, int],
    b_admin: AdminClient,
    timeout_s: float,
    settle_s: float,
) -> dict[str, Any]:
    """Run MM2 until its copies hold every visible record and the groups' offsets on b
    stay unchanged for `settle_s`; `groups` maps each group to its remote topic on b."""
    if not mm2_class_present():
        return {"error": "MirrorMaker 2 not found in the Kafka jars"}
    proc, log_path = start_mm2(
        MM2_DIR,
        mm2_properties_text(mm2_settings(a, b, topics, "bench-mm2-.*"), "benchmarks/translation.py"),
        target_cluster="dst",
    )
    start = time.monotonic()
    last: dict[str, int | None] = {}
    stable_since = None
    copied_at = None
    try:
        while True:
            now = time.monotonic()
            if proc.poll() is not None:
                return {"error": f"MirrorMaker exited with code {proc.returncode}", "log_tail": log_tail(log_path)}
            if now - start > timeout_s:
                return {"error": f"timed out after {timeout_s:.0f} s", "offsets": last, "log_tail": log_tail(log_path)}
            if copied_at is None:
                try:
                    ends = {t: end_offsets(b_admin, f"src.{t}", 1)[0] for t in topics}
                except Exception:  # not created yet
                    ends = {}
                if ends and all(ends[t] >= visible[t] for t in topics):
                    copied_at = now
                    say(f"MM2: every record copied after {now - start:.0f}s; waiting for the groups' offsets")
            else:
                current = committed_offsets(b, groups)
                if current != last:
                    last, stable_since = current, now
                elif all(v is not None for v in current.values()) and now - stable_since >= settle_s:
                    break
                elif now - stable_since >= max(settle_s, 60.0):
                    break  # some groups never got an offset: report them as such
            time.sleep(2)
    finally:
        stop_mm2(proc)
    return {
        "offsets": last,
        "copied_s": round(copied_at - start, 1),
        "total_s": round(time.monotonic() - start, 1),
        "log": str(log_path.relative_to(REPO)),
    }


# --- the run ------------------------------------------------------------------------


def group_name(method: str, kind: str, lag: int) -> str:
    return f"bench-{method}-{kind}-lag{lag}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1_000_000, help="records per source topic (default 1,000,000)")
    ap.add_argument("--record-bytes", type=int, default=100, help="value size (default 100)")
    ap.add_argument("--records-per-ms", type=int, default=50, help="records sharing one timestamp (default 50)")
    ap.add_argument("--lags", default=",".join(map(str, LAGS)), help="comma-separated group lags")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated topic kinds")
    ap.add_argument("--tx-records", type=int, default=500, help="records per transaction (default 500)")
    ap.add_argument("--abort-every", type=int, default=4, help="abort every N-th transaction (default 4)")
    ap.add_argument("--hot-every", type=int, default=50, help="compacted: every N-th record has a hot key (default 50)")
    ap.add_argument("--hot-keys", type=int, default=200, help="compacted: how many hot keys (default 200)")
    ap.add_argument("--compaction-timeout", type=float, default=300)
    ap.add_argument("--skip-mm2", action="store_true", help="leave out the MirrorMaker 2 reference")
    ap.add_argument("--mm2-timeout", type=float, default=900, help="give up on MM2 after this many seconds")
    ap.add_argument("--mm2-settle", type=float, default=20, help="MM2's offsets unchanged this long = final")
    ap.add_argument("--keep-clusters", action="store_true", help="leave the pair running at the end")
    ap.add_argument(
        "--base-port",
        type=int,
        default=BASE_PORT,
        help=f"broker port of cluster a; b is this + 10000 (default {BASE_PORT})",
    )
    ap.add_argument("--json-file", type=Path, metavar="PATH", help="also write every figure as JSON to PATH")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    lags = [int(x) for x in args.lags.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kind(s) {', '.join(sorted(unknown))}; known: {', '.join(KINDS)}")
    run_id = time.strftime("%H%M%S") + "-" + uuid.uuid4().hex[:4]
    recs = Records(args.record_bytes, args.records_per_ms, int(time.time() * 1000) - 3_600_000)
    report: dict[str, Any] = {"params": {k: v for k, v in vars(args).items() if k != "json_file"}, "topics": {}}
    methods = [m for m in METHODS if not (m == "mm2" and args.skip_mm2)]

    with local_clusters(BENCH_ROOT, args.keep_clusters, args.base_port) as lk:
        a, b = lk.bootstraps
        for boot in lk.bootstraps:
            warm_up(boot)
        a_admin, b_admin = admin_for(a), admin_for(b)

        # 1. the source topics
        topics: dict[str, str] = {}
        for kind in kinds:
            topic = f"bench-{kind}-{run_id}"
            topics[kind] = topic
            t0 = time.perf_counter()
            info: dict[str, Any] = {"topic": topic}
            if kind == "gap-free":
                create_topic(a_admin, topic, 1)
                produce_plain(a, topic, args.records, recs)
                info["written"] = args.records
            elif kind == "compacted":
                create_topic(a_admin, topic, 1, COMPACTED_TOPIC_CONFIG)
                produce_plain(a, topic, args.records, recs, args.hot_every, args.hot_keys)
                info["written"] = args.records
            else:
                create_topic(a_admin, topic, 1)
                info["written"] = produce_transactional(a, topic, args.records, recs, args.tx_records, args.abort_every)
            say(f"{kind}: wrote {info['written']:,} records to a:{topic} in {time.perf_counter() - t0:.1f}s")
            report["topics"][kind] = info
        if "compacted" in topics:
            end = end_offsets(a_admin, topics["compacted"], 1)[0]
            secs = wait_for_compaction(a, topics["compacted"], end, args.compaction_timeout)
            say(f"compacted: the log cleaner has run ({secs:.0f}s)")

        sources: dict[str, tuple[array, array]] = {}
        for kind, topic in topics.items():
            sources[kind] = read_partition(a, topic)
            info = report["topics"][kind]
            info["log_end"] = end_offsets(a_admin, topic, 1)[0]
            info["visible_records"] = len(sources[kind][0])
            info["gaps"] = sum(1 for x, y in pairwise(sources[kind][0]) if y != x + 1)
            say(
                f"{kind}: log end {info['log_end']:,}, {info['visible_records']:,} visible records, "
                f"{info['gaps']:,} gaps"
            )

        # 2. the groups, committed on the source before anything is synced
        groups: dict[str, dict[str, Any]] = {}
        for kind, topic in topics.items():
            end = report["topics"][kind]["log_end"]
            for lag in lags:
                for method in methods:
                    g = group_name(method, kind, lag)
                    commit_group(a, g, topic, end - lag)
                    groups[g] = {"kind": kind, "lag": lag, "method": method, "committed": end - lag}
        say(f"committed {len(groups)} source groups")

        # 3. the engine: mirror, sync in both modes, fail over
        cfg_exact = link_config(a, b, "exact", "bench-exact-")
        cfg_ts = link_config(a, b, "timestamp", "bench-timestamp-")
        mirrors = list(topics.values())
        t0 = time.perf_counter()
        mirror_all(cfg_exact, mirrors)
        report["mirror_s"] = round(time.perf_counter() - t0, 1)
        for mode, cfg in (("exact", cfg_exact), ("timestamp", cfg_ts)):
            result = engine.sync_offsets(cfg, LINK, mirrors=mirrors)
            report[f"sync_{mode}"] = {
                "committed": result.committed,
                "offset_sync_lag": result.offset_sync_lag,
                "checkpoint_latency_ms": result.checkpoint_latency_ms,
            }
            say(
                f"sync ({mode}): {result.committed} offsets committed, offset-sync lag {result.offset_sync_lag}, "
                f"checkpoint latency {result.checkpoint_latency_ms} ms"
            )
        # Failover's final sync uses the exact-mode config (its filter selects the exact groups);
        # the timestamp groups keep what the timestamp sync just committed: no record arrived since.
        engine.failover(cfg_exact, LINK, mirrors)
        say("failover done")
        ours = {g: topics[v["kind"]] for g, v in groups.items() if v["method"] != "mm2"}
        for g, offset in committed_offsets(b, ours).items():
            groups[g]["landed"] = offset
        copies = {kind: read_partition(b, topic) for kind, topic in topics.items()}

        # 4. MirrorMaker 2
        mm2_copies: dict[str, tuple[array, array]] = {}
        if "mm2" in methods:
            theirs = {g: f"src.{topics[v['kind']]}" for g, v in groups.items() if v["method"] == "mm2"}
            visible = {topic: report["topics"][kind]["visible_records"] for kind, topic in topics.items()}
            mm2 = run_mm2(a, b, mirrors, theirs, visible, b_admin, args.mm2_timeout, args.mm2_settle)
            report["mm2"] = {k: v for k, v in mm2.items() if k != "offsets"}
            if "error" in mm2:
                say(f"MM2: {mm2['error']}\n{mm2.get('log_tail', '')}")
            for g, offset in (mm2.get("offsets") or {}).items():
                groups[g]["landed"] = offset
            if "error" not in mm2:
                for kind, topic in topics.items():
                    mm2_copies[kind] = read_partition(b, f"src.{topic}")
                    report["topics"][kind]["mm2_copy_records"] = len(mm2_copies[kind][0])
        del a_admin, b_admin
        gc.collect()

    # 5. scoring
    for v in groups.values():
        copy = mm2_copies.get(v["kind"]) if v["method"] == "mm2" else copies[v["kind"]]
        if copy is None:
            v.update({"reread": None, "skipped": None})
            continue
        v.update(Truth(sources[v["kind"]], copy).score(v["committed"], v.get("landed")))
    report["groups"] = groups
    if args.json_file:
        args.json_file.write_text(json.dumps(report, indent=2) + "\n")
    print(render_table(report, kinds, lags, methods))
    return 0


def render_table(report: dict, kinds: list[str], lags: list[int], methods: list[str]) -> str:
    titles = {"exact": "exact", "timestamp": "timestamp", "mm2": "MM2 checkpoints"}
    p = report["params"]
    lines = [
        f"Offset translation after failover: {p['records']:,} records per topic, one partition, "
        f"{p['records_per_ms']} records per millisecond. Each cell: records re-read / skipped on the copy "
        "(0 / 0 = lands exactly; – = no offset on the copy).",
        "",
        "| topic | group lag | " + " | ".join(titles[m] for m in methods) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in methods) + " |",
    ]
    by_key = {(v["kind"], v["lag"], v["method"]): v for v in report["groups"].values()}
    for kind in kinds:
        for lag in lags:
            cells = []
            for m in methods:
                v = by_key.get((kind, lag, m), {})
                cells.append("–" if v.get("reread") is None else f"{v['reread']:,} / {v['skipped']:,}")
            lines.append(f"| {kind} | {lag:,} | " + " | ".join(cells) + " |")
    lines.append("")
    for kind in kinds:
        t = report["topics"][kind]
        extra = f", MM2 copy {t['mm2_copy_records']:,} records" if "mm2_copy_records" in t else ""
        lines.append(
            f"- {kind}: {t['written']:,} records written, log end {t['log_end']:,}, "
            f"{t['visible_records']:,} visible, {t['gaps']:,} offset gaps{extra}"
        )
    m = report.get("mm2")
    if m and "error" in m:
        lines.append(f"- MM2: {m['error']}")
    elif m:
        lines.append(f"- MM2: every record copied after {m['copied_s']} s, group offsets final after {m['total_s']} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
