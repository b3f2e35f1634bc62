#!/usr/bin/env python
"""Throughput benchmark: the mirror engine against the broker and MirrorMaker 2.

    .venv/bin/python benchmarks/throughput.py [--records N] [--record-bytes B]
        [--partitions P] [--keep-clusters] [--json] [--skip-mm2] [--wait-quiet S] ...

Starts its own pair of local single-node clusters (`.local-kafka/bench`, ports
19892/29892, away from the demo's 19092 and the tests' 11592), then measures,
all in one invocation on the same pair:

1. load        -- a tuned confluent-kafka producer fills the source topic;
2. broker      -- the same records written to a fresh destination topic by a
                  plain producer configured like the mirror writer (acks=all,
                  idempotent): the write ceiling a copy could hope for; the
                  fastest of two runs (`--broker-limit-runs`), as the first
                  also warms the destination broker's JVM;
3. read        -- a plain read_committed consumer reads the source topic back;
4. mirror cold -- `engine.create_mirror` + `engine.run_cycle` until lag is 0 in
                  a new Spark session (the first job starts Spark's Python
                  workers), with a per-step breakdown of each cycle and a
                  per-partition check that the mirror's log ends equal the
                  source's;
5. fixed       -- 5 cycles with nothing to copy (median and min seconds);
6. mirror warm -- the same source copied again into a second mirror topic with
                  the Spark session already warm;
7. mm2         -- MirrorMaker 2 in dedicated mode copying a fresh topic of the
                  same size, timed from JVM start until `a.<topic>` on the
                  destination holds every record.

For each measurement it also records the CPU seconds used by each process
group (brokers, this driver, Spark's JVM and Python workers, MM2) and by
everything else on the machine, read from /proc: on a small shared machine the
wall-clock figures depend on who else is busy, the CPU cost per record much
less.

It stops the clusters and deletes their storage at the end unless
`--keep-clusters`. Progress goes to stderr; the table (or, with `--json`, a
JSON document) to stdout. See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(REPO))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from benchmarks.common import (  # noqa: E402
    MM2_CLASS,
    MM2_SINGLE_NODE,
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
    topic_partition_count,
    warm_up,
)
from benchmarks.common import QUIET as _QUIET  # noqa: E402
from mirror_pipeline import engine  # noqa: E402
from mirror_pipeline.config.loader import parse_config  # noqa: E402
from mirror_pipeline.config.spark_requirements import default_local_master  # noqa: E402
from mirror_pipeline.kafka import clients as kc  # noqa: E402
from mirror_pipeline.local.jars import ensure_kafka_jars  # noqa: E402
from mirror_pipeline.replication import cycle as cycle_module  # noqa: E402

BENCH_ROOT = REPO / ".local-kafka" / "bench"
#: MM2's properties and log of the latest run; outside BENCH_ROOT so they outlive the wiped storage.
MM2_DIR = REPO / ".local-kafka" / "bench-mm2"
BASE_PORT = 19892
LINK = "a-to-b"
MB = 1_000_000  # MB/s figures are decimal megabytes of key + value bytes

# --- CPU accounting -----------------------------------------------------------
# On a 2-core machine everything competes for the same cores; the CPU seconds
# each process group used during a phase show where the time went.

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_stat(pid: int) -> tuple[int, float] | None:
    """(ppid, utime+stime seconds) of a live process.

    Children's times (cutime, cstime) are left out: a reaped child's CPU would
    otherwise land on its parent and be counted twice or under the wrong role.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3 of stat); ppid is field 4, utime and stime fields 14 and 15.
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class CpuMeter:
    """CPU seconds used by this process and its descendants, grouped by role."""

    def __init__(self, broker_dirs: dict[str, Path]):
        self.broker_dirs = broker_dirs  # role -> cluster dir (its server.properties is in the cmdline)
        self.enabled = Path("/proc/self/stat").exists()

    def _classify(self, pid: int) -> str:
        if pid == os.getpid():
            return "driver"
        cmd = _cmdline(pid)
        for role, d in self.broker_dirs.items():
            if str(d / "server.properties") in cmd:
                return role
        if MM2_CLASS in cmd:
            return "mm2"
        if "org.apache.spark" in cmd:
            return "spark-jvm"
        if "pyspark" in cmd:
            return "spark-python"
        return "other-children"

    def snapshot(self) -> dict[str, Any]:
        if not self.enabled:
            return {}
        parents: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _proc_stat(int(entry))
                if st:
                    parents[int(entry)], cpu[int(entry)] = st
        mine = {os.getpid()}
        changed = True
        while changed:
            changed = False
            for pid, ppid in parents.items():
                if ppid in mine and pid not in mine:
                    mine.add(pid)
                    changed = True
        # Brokers left running by an earlier --keep-clusters run are not our children.
        for pid in parents:
            if pid not in mine and any(
                str(d / "server.properties") in _cmdline(pid) for d in self.broker_dirs.values()
            ):
                mine.add(pid)
        per_pid = {pid: (self._classify(pid), cpu[pid]) for pid in mine if pid in cpu}
        with open("/proc/stat") as f:
            parts = f.readline().split()[1:]
        # user nice system idle iowait irq softirq steal ...: count work done on this
        # machine's CPUs, not idling, waiting or time stolen by the hypervisor.
        ticks = [int(x) for x in parts] + [0] * 8
        busy = (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / _CLK_TCK
        return {"pids": per_pid, "machine_busy": busy, "wall": time.monotonic()}

    @staticmethod
    def delta(before: dict, after: dict) -> dict[str, float]:
        if not before or not after:
            return {}
        roles: dict[str, float] = {}
        for pid, (role, cpu) in after["pids"].items():
            start = before["pids"].get(pid, (role, 0.0))[1]
            roles[role] = roles.get(role, 0.0) + max(0.0, cpu - start)
        ours = sum(roles.values())
        out = {k: round(v, 1) for k, v in sorted(roles.items()) if v >= 0.05}
        machine = after["machine_busy"] - before["machine_busy"]
        out["not-ours"] = round(max(0.0, machine - ours), 1)
        out["wall"] = round(after["wall"] - before["wall"], 1)
        return out


# --- Kafka helpers -------------------------------------------------------------


def wait_until_quiet(max_wait_s: float, cores: float = 0.3, window_s: float = 5.0) -> float:
    """Wait (up to max_wait_s) until other processes use less than `cores` CPUs; return that share."""
    meter = CpuMeter({})
    waited = 0.0
    while True:
        before = meter.snapshot()
        time.sleep(window_s)
        busy = CpuMeter.delta(before, meter.snapshot())
        share = busy.get("not-ours", 0.0) / window_s
        waited += window_s
        if share < cores or waited >= max_wait_s:
            if waited > window_s or share >= cores:
                say(
                    f"machine: other processes use {share:.2f} cores"
                    + ("" if share < cores else " (proceeding anyway)")
                )
            return share
        say(f"machine busy with other work ({share:.2f} cores); waiting")


class Payloads:
    """Random-ish values of a fixed size (a sequence stamp + a slice of a random pool) and keys."""

    HEADERS = [("bench-origin", b"throughput.py")]

    def __init__(self, record_bytes: int):
        self.size = record_bytes
        self.pool = os.urandom(record_bytes + 8192)
        self.bodies = [self.pool[(j * 257) % 8192 : (j * 257) % 8192 + max(0, record_bytes - 8)] for j in range(32)]

    def key(self, i: int) -> bytes:
        return b"k%09d" % i

    def value(self, i: int) -> bytes:
        if self.size < 8:
            return self.pool[: self.size]
        return b"%08x" % (i & 0xFFFFFFFF) + self.bodies[i & 31]

    def payload_bytes(self, n: int) -> int:
        """Key + value bytes of records 0..n-1 (what CycleResult.bytes counts)."""
        return sum(len(self.key(i)) for i in range(n)) + n * self.size


LOAD_PRODUCER = {
    "acks": "1",
    "enable.idempotence": False,
    "linger.ms": 20,
    "batch.size": 1000000,
    "batch.num.messages": 100000,
    "compression.type": "none",
    "queue.buffering.max.messages": 1000000,
    "queue.buffering.max.kbytes": 1048576,
}


def mirror_writer_like_conf() -> dict:
    """The mirror writer's settings (copier._copy), as a plain producer would carry them."""
    conf = dict(kc.ROLE_SETTINGS["writer"])
    # copier._copy: batch.size = max(16384, min(1000000, max.message.bytes - 512)); default topic limit.
    conf["batch.size"] = max(16384, min(1000000, 1048588 - 512))
    return conf


def produce(
    bootstrap: str, topic: str, n: int, partitions: int, payloads: Payloads, conf: dict, client_id: str
) -> float:
    """Write n records round-robin over the partitions; seconds from first produce to last ack."""
    failures: list[KafkaError] = []
    delivered = [0]
    # With `delivery.report.only.error` (the mirror writer's setting) only failures
    # are reported: then every record flush() does not leave behind was delivered.
    errors_only = bool(conf.get("delivery.report.only.error"))

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)
        else:
            delivered[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "logger": _QUIET, **conf})
    p.list_topics(topic, timeout=10)  # connect and learn leaders before the clock starts
    key, value, headers = payloads.key, payloads.value, Payloads.HEADERS
    start = time.perf_counter()
    for i in range(n):
        k, v, part = key(i), value(i), i % partitions
        while True:
            try:
                p.produce(topic, value=v, key=k, partition=part, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
        if not i & 1023:
            p.poll(0)
        if failures:
            break
    remaining = p.flush(300)
    elapsed = time.perf_counter() - start
    if errors_only:
        delivered[0] = n - remaining - len(failures)
    if failures or remaining or delivered[0] != n:
        why = failures[0].str() if failures else f"{remaining} unacknowledged, {delivered[0]} of {n} delivered"
        raise RuntimeError(f"producing to {topic} failed: {why}")
    return elapsed


def consume_all(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    """Read n records from offset 0 of every partition with the mirror reader's settings."""
    conf = kc.client_config({"bootstrap.servers": bootstrap}, "bench", "reader")
    conf["group.id"] = f"bench-read-{uuid.uuid4().hex[:8]}"
    c = Consumer({**conf, "logger": _QUIET})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        nbytes = 0
        start = time.perf_counter()
        deadline = time.monotonic() + 600
        while got < n:
            for msg in c.consume(10000, 0.5):
                if msg.error():
                    raise RuntimeError(f"reading {topic} failed: {msg.error().str()}")
                got += 1
                nbytes += len(msg)
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading {topic}: {got} of {n} records after 600s")
        return time.perf_counter() - start
    finally:
        c.close()


def rate(records: int, nbytes: int, seconds: float) -> dict[str, float]:
    seconds = max(seconds, 1e-9)
    return {
        "records": records,
        "bytes": nbytes,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(nbytes / seconds / MB, 2),
    }


# --- mirror cycles -------------------------------------------------------------


class PhaseTimer:
    """Times the steps of `cycle.run_cycle` by wrapping the module functions it calls.

    Only this process's view of the module changes; the engine files are untouched.
    """

    STEPS = {
        "plan": "plan_cycle",
        "spark_job": "run_unit_groups",
        "consolidate": "_consolidate",
        "finish": "_cycle_result",
    }

    def __init__(self, keep_units: bool = True):
        self.current: dict[str, float] = {}
        self._originals: dict[str, Callable] = {}
        # The copy tasks' results (`UnitResult`) since the last take_units(); not kept by a
        # caller that never takes them (it would only grow).
        self.keep_units = keep_units
        self.units: list = []

    def install(self) -> None:
        for step, name in self.STEPS.items():
            original = getattr(cycle_module, name, None)
            if original is None:  # the engine moved on; that step just goes untimed
                say(f"note: mirror_pipeline.cycle.{name} not found; the '{step}' step is not timed")
                continue
            self._originals[name] = original
            setattr(cycle_module, name, self._wrap(step, original))

    def uninstall(self) -> None:
        for name, original in self._originals.items():
            setattr(cycle_module, name, original)

    def _wrap(self, step: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
                if step == "spark_job" and self.keep_units:
                    self.units.extend(out)
                return out
            finally:
                self.current[step] = self.current.get(step, 0.0) + time.perf_counter() - t0

        return timed

    def take(self) -> dict[str, float]:
        out, self.current = {k: round(v, 3) for k, v in self.current.items()}, {}
        return out

    def take_units(self) -> dict[str, Any]:
        """The copy tasks' memory and replication latency since the last call (figures the tasks report).

        The latency goes to the JSON only: the records are loaded before the copy
        starts, so here it mostly measures how long they waited.
        """
        units, self.units = self.units, []
        peaks = [u.rss_peak_bytes for u in units if getattr(u, "rss_peak_bytes", -1) > 0]
        starts = [u.rss_start_bytes for u in units if getattr(u, "rss_start_bytes", -1) > 0]
        timed = [u for u in units if getattr(u, "latency_records", 0) > 0]
        out: dict[str, Any] = {"tasks": len(units)}
        if peaks:
            out["rss_peak_mib_max"] = round(max(peaks) / 2**20, 1)
            out["rss_start_mib_max"] = round(max(starts) / 2**20, 1)
            out["rss_growth_mib_max"] = round(
                max(
                    u.rss_peak_bytes - u.rss_start_bytes
                    for u in units
                    if u.rss_peak_bytes > 0 and u.rss_start_bytes > 0
                )
                / 2**20,
                1,
            )
        if timed:
            count = sum(u.latency_records for u in timed)
            out["latency_ms"] = {
                "records": count,
                "min": min(u.latency_min_ms for u in timed),
                "avg": round(sum(u.latency_sum_ms for u in timed) / count, 1),
                "max": max(u.latency_max_ms for u in timed),
            }
        return out


def run_cycles_until_caught_up(
    cfg, spark, timer: PhaseTimer, max_cycles: int, mirrors: list[str] | None = None
) -> list[dict]:
    cycles = []
    while True:
        t0 = time.perf_counter()
        error = ""
        try:
            result = engine.run_cycle(cfg, LINK, spark, mirrors=mirrors)
        except engine.CycleFailed as exc:  # some units failed; the others' lineage is attached
            result, error = exc.result, str(exc)
        wall = time.perf_counter() - t0
        entry = {
            "wall_s": round(wall, 3),
            "duration_s": round(result.duration_s, 3),
            "records": result.records,
            "bytes": result.bytes,
            "work_units": result.work_units,
            "lag_after": result.lag_after,
            "steps_s": timer.take(),
        }
        if error:
            entry["error"] = error
            say(f"cycle {len(cycles) + 1} FAILED: {error}")
        cycles.append(entry)
        say(
            f"cycle {len(cycles)}: {result.records} records in {wall:.2f}s wall "
            f"(duration_s {result.duration_s:.2f}, steps {entry['steps_s']}), lag after {result.lag_after}"
        )
        if result.lag_after == 0 or error or len(cycles) >= max_cycles:
            return cycles


def warm_job_overhead(spark, tasks: int) -> float:
    """Seconds for a no-op mapInArrow job of `tasks` one-row tasks (scheduling + worker round trip)."""

    def passthrough(batches):
        yield from batches

    t0 = time.perf_counter()
    spark.range(0, tasks, 1, numPartitions=tasks).mapInArrow(passthrough, "id long").collect()
    return time.perf_counter() - t0


# --- MirrorMaker 2 ----------------------------------------------------------------


def mm2_properties(a: str, b: str, topic: str) -> str:
    settings = {
        "clusters": "a, b",
        "a.bootstrap.servers": a,
        "b.bootstrap.servers": b,
        "a->b.enabled": "true",
        "a->b.topics": topic,
        "b->a.enabled": "false",
        **MM2_SINGLE_NODE,
        "tasks.max": "2",
        "sync.topic.acls.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "600",
    }
    return mm2_properties_text(settings, "benchmarks/throughput.py")


def run_mm2(
    workdir: Path,
    a: str,
    b: str,
    topic: str,
    partitions: int,
    n: int,
    timeout_s: float,
    dest_admin: AdminClient,
    before_stop: Callable[[], None] = lambda: None,
) -> dict:
    """Run MM2 until b holds all n records of `a.<topic>`; `before_stop` runs while MM2 still lives."""
    if not mm2_class_present():
        return {"skipped": f"{MM2_CLASS} not found in the Kafka jars ({ensure_kafka_jars()})"}
    remote = f"a.{topic}"
    start = time.perf_counter()
    proc, log_path = start_mm2(workdir, mm2_properties(a, b, topic))
    created_at = first_at = done_at = None
    last_total, last_report = 0, time.perf_counter()
    why = ""
    try:
        while True:
            now = time.perf_counter()
            if proc.poll() is not None:
                why = f"MirrorMaker exited with code {proc.returncode} after {now - start:.1f}s"
                break
            if now - start > timeout_s:
                why = f"timed out after {timeout_s:.0f}s with {last_total} of {n} records on b:{remote}"
                break
            if created_at is None and topic_partition_count(dest_admin, remote) == partitions:
                created_at = now
            if created_at is not None:
                try:
                    total = sum(end_offsets(dest_admin, remote, partitions))
                except Exception:  # leadership settling right after creation
                    total = last_total
                if total and first_at is None:
                    first_at = time.perf_counter()
                last_total = total
                if total >= n:
                    done_at = time.perf_counter()
                    break
            if now - last_report > 10:
                say(f"MM2: {last_total} of {n} records on b:{remote} after {now - start:.0f}s")
                last_report = now
            time.sleep(0.1)
    finally:
        before_stop()
        stop_mm2(proc)
    out: dict[str, Any] = {"log": str(log_path), "remote_topic": remote}
    if created_at is not None:
        out["topic_created_s"] = round(created_at - start, 2)
    if first_at is not None:
        out["first_record_s"] = round(first_at - start, 2)
    if done_at is None:
        out["error"] = why
        out["log_tail"] = log_tail(log_path)
        return out
    out["total_s"] = round(done_at - start, 2)
    out["records_on_remote"] = last_total
    return out


# --- the run ----------------------------------------------------------------------


def clusters(keep: bool, base_port: int):
    return local_clusters(BENCH_ROOT, keep, base_port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=1_000_000, help="records per topic (default 1,000,000)")
    ap.add_argument("--record-bytes", type=int, default=1024, help="value size in bytes (default 1024)")
    ap.add_argument("--partitions", type=int, default=8, help="partitions per topic (default 8)")
    ap.add_argument("--keep-clusters", action="store_true", help="leave the pair running (and its data) at the end")
    ap.add_argument(
        "--base-port",
        type=int,
        default=BASE_PORT,
        help=f"broker port of cluster a; b is this + 10000 (default {BASE_PORT})",
    )
    ap.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    ap.add_argument("--json-file", type=Path, metavar="PATH", help="also write the JSON document to PATH")
    ap.add_argument(
        "--broker-limit-runs",
        type=int,
        default=2,
        help="measure the broker limit this many times and keep the fastest (default 2)",
    )
    ap.add_argument("--skip-mm2", action="store_true", help="leave out the MirrorMaker 2 reference")
    ap.add_argument("--mm2-timeout", type=float, default=900, help="give up on MM2 after this many seconds")
    ap.add_argument(
        "--skip-warm-copy", action="store_true", help="leave out the second copy made with Spark already warm"
    )
    ap.add_argument("--empty-cycles", type=int, default=5, help="cycles with nothing to copy (default 5)")
    ap.add_argument("--max-cycles", type=int, default=20, help="stop copying after this many cycles")
    ap.add_argument(
        "--unit-max-bytes",
        type=int,
        default=4 * 1024**3,
        help="link setting mirror.unit.max.bytes (default 4 GiB: one cycle copies everything)",
    )
    ap.add_argument(
        "--spark-master", default=None, help="spark.master (default: the engine's, two task slots per core)"
    )
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each measurement, wait up to this long for other processes to leave the "
        "CPUs (mostly) idle: for shared machines",
    )
    args = ap.parse_args(argv)
    if args.broker_limit_runs < 1:
        ap.error("--broker-limit-runs must be at least 1")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    n, size, parts = args.records, args.record_bytes, args.partitions
    run_id = time.strftime("%H%M%S") + "-" + uuid.uuid4().hex[:4]
    payloads = Payloads(size)
    nbytes = payloads.payload_bytes(n)
    report: dict[str, Any] = {
        "params": {
            "records": n,
            "record_bytes": size,
            "partitions": parts,
            "payload_bytes": nbytes,
            "cpus": os.cpu_count(),
            "unit_max_bytes": args.unit_max_bytes,
            "spark_master": args.spark_master or default_local_master(),
        },
    }

    if args.wait_quiet > 0:
        report["params"]["other_load_cores_at_start"] = round(wait_until_quiet(args.wait_quiet), 2)

    with clusters(args.keep_clusters, args.base_port) as lk:
        a_boot, b_boot = lk.bootstraps
        t0 = time.perf_counter()
        for boot in lk.bootstraps:
            warm_up(boot)
        report["params"]["cluster_warm_up_s"] = round(time.perf_counter() - t0, 2)
        say(f"clusters warmed up (group and transaction coordinators) in {report['params']['cluster_warm_up_s']}s")
        meter = CpuMeter({"broker-a": lk.root / lk.names[0], "broker-b": lk.root / lk.names[1]})
        a_admin, b_admin = admin_for(a_boot), admin_for(b_boot)
        cpu: dict[str, dict] = {}
        report["cpu_s"] = cpu

        def settle() -> None:
            if args.wait_quiet > 0:
                wait_until_quiet(args.wait_quiet, window_s=3.0)

        def measured(name: str):
            @contextmanager
            def scope():
                settle()
                before = meter.snapshot()
                yield
                cpu[name] = CpuMeter.delta(before, meter.snapshot())

            return scope()

        # 1. load the source
        src = f"bench-src-{run_id}"
        create_topic(a_admin, src, parts)
        say(f"load: producing {n} x {size} B records to a:{src} ({parts} partitions)")
        with measured("load"):
            secs = produce(a_boot, src, n, parts, payloads, LOAD_PRODUCER, "bench-loader")
        report["load"] = rate(n, nbytes, secs)
        say(f"load: {report['load']['records_per_s']:.0f} records/s, {report['load']['mb_per_s']:.1f} MB/s")

        # 2. broker limit reference: the destination, written like the mirror writer writes. The fastest of
        #    several runs, each into a fresh topic: the first heavy write into broker b also warms its JVM
        #    (the first run was 1.2-1.9 times slower than the second), which would flatter every ratio.
        limits = []
        for attempt in range(1, args.broker_limit_runs + 1):
            ref = f"bench-ref-{run_id}-{attempt}"
            create_topic(b_admin, ref, parts)
            say(
                f"broker limit {attempt}/{args.broker_limit_runs}: producing {n} records to b:{ref} "
                f"(acks=all, idempotent, mirror writer settings)"
            )
            with measured(f"broker_limit_{attempt}"):
                secs = produce(b_boot, ref, n, parts, payloads, mirror_writer_like_conf(), "bench-ref-writer")
            limits.append((secs, attempt))
            say(f"broker limit {attempt}: {n / secs:.0f} records/s")
        secs, fastest = min(limits)
        cpu["broker_limit"] = cpu[f"broker_limit_{fastest}"]
        for _, attempt in limits:
            del cpu[f"broker_limit_{attempt}"]
        report["broker_limit"] = {**rate(n, nbytes, secs), "runs_records_per_s": [round(n / s) for s, _ in limits]}
        say(
            f"broker limit: {report['broker_limit']['records_per_s']:.0f} records/s, "
            f"{report['broker_limit']['mb_per_s']:.1f} MB/s (the fastest of {len(limits)})"
        )

        # 3. read reference: the source, read like the mirror reader reads
        say(f"read: consuming a:{src} with the mirror reader's settings")
        with measured("source_read"):
            secs = consume_all(a_boot, src, parts, n)
        report["source_read"] = rate(n, nbytes, secs)
        say(
            f"read: {report['source_read']['records_per_s']:.0f} records/s, "
            f"{report['source_read']['mb_per_s']:.1f} MB/s"
        )

        # 4. mirror copy
        raw_cfg: dict[str, Any] = {
            "clusters": {"a": {"bootstrap.servers": a_boot}, "b": {"bootstrap.servers": b_boot}},
            "links": {LINK: {"source": "a", "destination": "b", "mirror.unit.max.bytes": args.unit_max_bytes}},
        }
        if args.spark_master:
            raw_cfg["spark"] = {"master": args.spark_master}
        cfg = parse_config(raw_cfg, "bench")
        t0 = time.perf_counter()
        engine.create_mirror(cfg, LINK, src)
        create_s = time.perf_counter() - t0
        say(f"mirror: created mirror of {src} in {create_s:.2f}s; starting Spark")
        from mirror_pipeline.replication.spark_runner import spark_session

        t0 = time.perf_counter()
        spark = spark_session(cfg.spark)
        spark_start_s = time.perf_counter() - t0
        say(
            f"mirror: Spark session up in {spark_start_s:.1f}s (master {spark.sparkContext.master}, "
            f"default parallelism {spark.sparkContext.defaultParallelism})"
        )
        timer = PhaseTimer()
        timer.install()
        try:
            timer.take_units()
            with measured("mirror_copy"):
                cycles = run_cycles_until_caught_up(cfg, spark, timer, args.max_cycles)
            cold_tasks = timer.take_units()
            copied = sum(c["records"] for c in cycles)
            copied_bytes = sum(c["bytes"] for c in cycles)
            total_wall = sum(c["wall_s"] for c in cycles)
            total_duration = sum(c["duration_s"] for c in cycles)
            job_s = sum(c["steps_s"].get("spark_job", 0.0) for c in cycles)
            src_ends = end_offsets(a_admin, src, parts)
            mirror_ends = end_offsets(b_admin, src, parts)
            sanity = (
                "OK"
                if src_ends == mirror_ends and copied == n and not any("error" in c for c in cycles)
                else "MISMATCH"
            )
            report["mirror"] = {
                "create_mirror_s": round(create_s, 3),
                "spark_session_s": round(spark_start_s, 3),
                "cycles": cycles,
                "total": rate(copied, copied_bytes, total_wall),
                "copy": rate(copied, copied_bytes, total_duration),
                "spark_job": rate(copied, copied_bytes, job_s) if job_s else None,
                "lag_after": cycles[-1]["lag_after"],
                "sanity": sanity,
                "source_end_offsets": src_ends,
                "mirror_end_offsets": mirror_ends,
                "tasks": cold_tasks,
            }
            say(f"mirror: sanity {sanity}: source ends {src_ends}, mirror ends {mirror_ends}")

            # 5. fixed cost of an empty cycle
            empties = []
            empty_steps = []
            for _ in range(args.empty_cycles):
                t0 = time.perf_counter()
                result = engine.run_cycle(cfg, LINK, spark)
                empties.append(time.perf_counter() - t0)
                empty_steps.append(timer.take())
                if result.records:
                    say(f"WARNING: an 'empty' cycle copied {result.records} records")
            if empties:
                report["empty_cycle"] = {
                    "runs_s": [round(x, 3) for x in empties],
                    "median_s": round(statistics.median(empties), 3),
                    "min_s": round(min(empties), 3),
                    "steps_s": empty_steps,
                }
                say(f"empty cycles: {report['empty_cycle']['runs_s']}")
            # Per-job overhead of Spark alone, warm (no Kafka work at all).
            report["mirror"]["warm_noop_job_s"] = round(min(warm_job_overhead(spark, parts) for _ in range(3)), 3)

            # 4b. the same copy again with Spark warm: a second mirror of the same source topic
            if not args.skip_warm_copy:
                warm_name = f"{src}-warm"
                engine.create_mirror(cfg, LINK, src, warm_name)
                say(f"mirror (warm): copying {src} again into b:{warm_name} with the same Spark session")
                timer.take_units()
                with measured("mirror_warm_copy"):
                    warm_cycles = run_cycles_until_caught_up(cfg, spark, timer, args.max_cycles, mirrors=[warm_name])
                warm_tasks = timer.take_units()
                w_records = sum(c["records"] for c in warm_cycles)
                w_job_s = sum(c["steps_s"].get("spark_job", 0.0) for c in warm_cycles)
                w_bytes = sum(c["bytes"] for c in warm_cycles)
                w_ends = end_offsets(b_admin, warm_name, parts)
                w_ok = w_ends == src_ends and w_records == n and not any("error" in c for c in warm_cycles)
                report["mirror_warm"] = {
                    "cycles": warm_cycles,
                    "total": rate(w_records, w_bytes, sum(c["wall_s"] for c in warm_cycles)),
                    "spark_job": rate(w_records, w_bytes, w_job_s) if w_job_s else None,
                    "sanity": "OK" if w_ok else "MISMATCH",
                    "mirror_end_offsets": w_ends,
                    "tasks": warm_tasks,
                }
                say(f"mirror (warm): sanity {report['mirror_warm']['sanity']}")
        finally:
            timer.uninstall()
            spark.stop()

        # 6. MirrorMaker 2
        if args.skip_mm2:
            report["mm2"] = {"skipped": "--skip-mm2"}
        else:
            mm2_src = f"bench-mm2-{run_id}"
            create_topic(a_admin, mm2_src, parts)
            say(f"MM2: loading a:{mm2_src}")
            produce(a_boot, mm2_src, n, parts, payloads, LOAD_PRODUCER, "bench-loader")
            settle()
            before = meter.snapshot()
            mm2 = run_mm2(
                MM2_DIR,
                a_boot,
                b_boot,
                mm2_src,
                parts,
                n,
                args.mm2_timeout,
                b_admin,
                before_stop=lambda: cpu.__setitem__("mm2", CpuMeter.delta(before, meter.snapshot())),
            )
            if "total_s" in mm2:
                mm2["total"] = rate(n, nbytes, mm2["total_s"])
                if "first_record_s" in mm2:
                    mm2["after_first_record"] = rate(n, nbytes, mm2["total_s"] - mm2["first_record_s"])
                say(f"MM2: {n} records in {mm2['total_s']:.1f}s (first record after {mm2.get('first_record_s')}s)")
            else:
                say(f"MM2: not measured: {mm2.get('skipped') or mm2.get('error')}")
            report["mm2"] = mm2
        del a_admin, b_admin  # no client left connected while the brokers stop
        gc.collect()

    if args.json_file:
        args.json_file.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render_table(report))
    ok = report.get("mirror", {}).get("sanity") == "OK" and report.get("mirror_warm", {}).get("sanity", "OK") == "OK"
    return 0 if ok else 1


def render_table(r: dict) -> str:
    W = 57  # label column
    p = r["params"]
    ref = r["broker_limit"]["records_per_s"]
    cpu = r.get("cpu_s") or {}
    rule = "-" * (W + 64)
    lines = [
        f"mirror-pipeline throughput: {p['records']:,} records x {p['record_bytes']} B, {p['partitions']} partitions "
        f"({p['payload_bytes'] / MB:,.0f} MB key+value), "
        f"{p['cpus']} CPUs shared by both brokers, Spark and the clients",
        "",
        f"{'measurement':<{W}} {'seconds':>9} {'records/s':>11} {'MB/s':>8} {'vs broker':>9} "
        f"{'CPU us/rec':>10} {'other load':>11}",
        rule,
    ]

    def row(label: str, fig: dict | None, phase: str = "") -> None:
        if not fig:
            return
        line = (
            f"{label:<{W}} {fig['seconds']:>9.2f} {fig['records_per_s']:>11,.0f} {fig['mb_per_s']:>8.1f} "
            f"{fig['records_per_s'] / ref:>9.0%}"
        )
        roles = cpu.get(phase)
        if roles and fig["records"]:
            ours = sum(v for k, v in roles.items() if k not in ("not-ours", "wall"))
            line += f" {ours / fig['records'] * 1e6:>10.1f} {roles['not-ours'] / max(roles['wall'], 1e-9):>6.2f} cores"
        lines.append(line)

    row("load source (producer, acks=1)", r["load"], "load")
    row(
        f"broker limit (best of {len(r['broker_limit'].get('runs_records_per_s', [1]))}: producer -> dest, acks=all)",
        r["broker_limit"],
        "broker_limit",
    )
    row("source read (consumer, read_committed)", r["source_read"], "source_read")
    m = r.get("mirror")
    if m:
        n_cycles = len(m["cycles"])
        row(
            f"mirror cold: cycles total ({n_cycles} cycle{'s' if n_cycles > 1 else ''}, incl. worker start)",
            m["total"],
            "mirror_copy",
        )
        row("mirror cold: copy time (sum of result.duration_s)", m["copy"])
        row("mirror cold: Spark job only (run_unit_groups)", m["spark_job"])
    w = r.get("mirror_warm")
    if w:
        n_cycles = len(w["cycles"])
        row(
            f"mirror warm: cycles total ({n_cycles} cycle{'s' if n_cycles > 1 else ''}, same session)",
            w["total"],
            "mirror_warm_copy",
        )
        row("mirror warm: Spark job only (run_unit_groups)", w["spark_job"])
    mm2 = r.get("mm2", {})
    if "total" in mm2:
        row("MM2: JVM start -> all records on b", mm2["total"], "mm2")
        if "after_first_record" in mm2:
            row("MM2: first record -> all records", mm2["after_first_record"])
    lines.append(rule)
    if m:
        lines.append(f"{'mirror: Spark session start (once, not in cycles)':<{W}} {m['spark_session_s']:>9.2f}")
        first = m["cycles"][0]["steps_s"]
        lines.append(f"{'mirror: cold cycle 1 steps (s)':<{W}} " + ", ".join(f"{k} {v:.2f}" for k, v in first.items()))
        lines.append(
            f"{'mirror: warm no-op Spark job, ' + str(p['partitions']) + ' tasks':<{W}} {m['warm_noop_job_s']:>9.2f}"
        )
    e = r.get("empty_cycle")
    if e:
        lines.append(
            f"{'empty cycle fixed cost: median / min':<{W}} {e['median_s']:>9.2f} / {e['min_s']:.2f} s "
            f"over {len(e['runs_s'])} cycles"
        )
    if "first_record_s" in mm2:
        lines.append(
            f"{'MM2: start-up (JVM start -> first record on b)':<{W}} {mm2['first_record_s']:>9.2f}"
            f"   (remote topic created at {mm2.get('topic_created_s', '?')} s)"
        )
    elif mm2:
        lines.append(f"{'MM2':<{W}} not measured: {mm2.get('skipped') or mm2.get('error')}")
    if m:
        lines.append(
            f"{'mirror sanity: per-partition end offsets':<{W}} {m['sanity']:>9}"
            + ("" if m["sanity"] == "OK" else f"   source {m['source_end_offsets']} mirror {m['mirror_end_offsets']}")
        )
    if w:
        lines.append(
            f"{'mirror warm sanity: per-partition end offsets':<{W}} {w['sanity']:>9}"
            + ("" if w["sanity"] == "OK" else f"   mirror {w['mirror_end_offsets']}")
        )
    for label, fig in (("cold", m), ("warm", w)):
        tasks = (fig or {}).get("tasks") or {}
        if "rss_peak_mib_max" in tasks:
            lines.append(
                f"{'mirror ' + label + ': copy task peak RSS, max of ' + str(tasks['tasks']) + ' tasks (MiB)':<{W}} "
                f"{tasks['rss_peak_mib_max']:>9.0f}   (at task start {tasks['rss_start_mib_max']:.0f}, "
                f"growth {tasks['rss_growth_mib_max']:.0f})"
            )
    if "records_on_remote" in mm2:
        extra = mm2["records_on_remote"] - p["records"]
        lines.append(
            f"{'MM2 sanity: records on the remote topic':<{W}} {mm2['records_on_remote']:>9,}"
            + (f"   ({extra:,} duplicates)" if extra else "")
        )
    if cpu:
        lines.append("")
        lines.append(
            f"CPU seconds per process group during each measurement ({p['cpus']} cores => at most "
            f"{p['cpus']} x wall; not-ours = everything else on the machine):"
        )
        for phase, roles in cpu.items():
            lines.append(f"  {phase:<17} " + ", ".join(f"{k} {v}" for k, v in roles.items()))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
