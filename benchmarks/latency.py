#!/usr/bin/env python
"""Latency benchmark: how long a record takes from the source to the mirror, per way of running the mirror.

    .venv/bin/python benchmarks/latency.py [--seconds 180] [--rate 2000] [--warm-seconds 30]
        [--modes LIST | --skip LIST] [--epoch-seconds N] [--burst-records N] [--json] [--json-file PATH]
        [--keep-clusters] ...

Starts its own pair of local single-node clusters (`.local-kafka/bench-latency`,
ports 17592/27592), then, for each mode on fresh topics, runs a steady load
(--rate records/s of --record-bytes over --partitions partitions for --seconds)
on `a` and times every record's arrival on the mirror on `b`:

1. mm2               -- MirrorMaker 2 (dedicated mode, its defaults, its start script's JVM options);
2. cycles            -- `mirror-pipeline run --link L` processes back to back;
3. scheduled         -- `run --link L` started every --schedule-seconds (60, the default schedule);
4. follow            -- one `run --link L --follow` process on local[*], stopped with SIGTERM;
5. follow-standalone -- the same with its executors on a local Spark standalone cluster
                        (master 17680-17685, Connect server 17690);
6. cycles-connect    -- `run --link L` processes back to back through that cluster's
                        running Spark Connect server (no Spark start per run);
7. sensor            -- the link's Dagster automation (`mirror-pipeline ui`, --ui-port):
                        the daemon's lag sensor asks for replicate runs, the run queue
                        launches them, Spark through the same Connect server.

Latency = the tracker's wall clock when a read_committed consumer on the mirror
receives the record, minus the record's CreateTime, set by the producer (1 ms
linger) from the same clock. MM2, follow, sensor and the back-to-back cycle
modes are measured once running and warm: a warm-up trickle runs until their
first record arrives, then the steady load itself for --warm-seconds, and the
warm-up is reported apart. After follow's run, a
burst (--burst-records, as fast as possible) gives its copy rate, next to the
same burst copied by one `run --link` process. Progress on stderr, the table
(or --json) on stdout; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from benchmarks.common import (  # noqa: E402
    admin_for,
    create_topic,
    create_topics,
    local_clusters,
    mm2_class_present,
    say,
    wait_for_leaders,
    wait_until_listed,
    warm_up,
)
from benchmarks.latency_copiers import CliCycles, Copier, Follow, Mm2, follow_options  # noqa: E402
from benchmarks.latency_cpu import CpuSampler  # noqa: E402
from benchmarks.latency_load import (  # noqa: E402
    BURST,
    BURST_PRODUCER,
    MEASURED,
    WARM,
    Load,
    Tracker,
    arrival_rate,
    phase_stats,
)
from benchmarks.latency_report import render_table  # noqa: E402
from benchmarks.latency_sensor import SensorRuns  # noqa: E402
from benchmarks.throughput import CpuMeter, wait_until_quiet  # noqa: E402
from mirror_pipeline import engine  # noqa: E402
from mirror_pipeline.config.loader import load_config  # noqa: E402
from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS  # noqa: E402
from mirror_pipeline.config.spark_requirements import QUICK_JVM, default_local_master  # noqa: E402
from mirror_pipeline.local.spark_cluster import LocalSpark  # noqa: E402

BENCH_ROOT = REPO / ".local-kafka" / "bench-latency"
#: Configs, logs, MM2's files, the CLI's Dagster instance: outside BENCH_ROOT so they outlive the wiped storage.
WORK_DIR = REPO / ".local-kafka" / "bench-latency-work"
BASE_PORT = 17592
SPARK_MASTER_PORT = 17680  # the master and its UI, then two workers and their UIs: 17680..17685
SPARK_CONNECT_PORT = 17690
UI_PORT = 17695  # the sensor mode's Dagster webserver
MODES = ("mm2", "cycles", "scheduled", "follow", "follow-standalone", "cycles-connect", "sensor")
# Modes that run on the local standalone cluster (started around them); the config each uses.
ON_STANDALONE = ("follow-standalone", "cycles-connect", "sensor")
LINKS = {mode: f"lat-{mode}" for mode in MODES[1:]} | {"burst-cycle": "lat-burst"}
WIDE_MODES = ("mm2", "follow", "follow-standalone")  # the modes --topics spreads over many topics


def write_config(
    path: Path,
    a: str,
    b: str,
    spark: dict[str, Any],
    links: dict[str, dict] | None = None,
    every_link: dict | None = None,
) -> Path:
    """A link per mode, so each `run --link` sees its own mirror only; auto-create stays off (its default).

    `links`: each link's own settings (the sensor mode's config); `every_link`: settings of them all.
    """
    links = links if links is not None else {link: {} for link in LINKS.values()}
    data = {
        "clusters": {"a": {"bootstrap.servers": a}, "b": {"bootstrap.servers": b}},
        "links": {
            link: {"source": "a", "destination": "b", **(every_link or {}), **settings}
            for link, settings in links.items()
        },
        "spark": spark,
    }
    path.write_text(f"# Written by benchmarks/latency.py\n{yaml.safe_dump(data, sort_keys=False)}")
    return path


def wide_prefix(mode: str, run_id: str) -> str:
    return f"lat-{mode}-{run_id}-"


def wide_links(run_id: str) -> dict[str, dict]:
    """With --topics: each link auto-creates the mirrors of its own mode's topics, as a wide link is run."""
    return {
        link: {
            "auto.create.mirror.topics.enable": True,
            "auto.create.mirror.topics.filters": {
                "topicFilters": [
                    {"name": wide_prefix(mode, run_id), "patternType": "PREFIXED", "filterType": "INCLUDE"}
                ]
            },
        }
        for mode, link in LINKS.items()
    }


class Bench:
    """The clusters, configs and settings every mode shares."""

    def __init__(self, args: argparse.Namespace, a: str, b: str, meter: CpuMeter, run_id: str):
        self.args, self.a, self.b, self.meter, self.run_id = args, a, b, meter, run_id
        self.a_admin = admin_for(a)
        self.b_admin = admin_for(b)
        spark = {"master": args.spark_master} if args.spark_master else {}
        every = {"mirror.writer.slots": args.writer_slots} if args.writer_slots else {}
        wide = wide_links(run_id) if args.topics > 1 else None
        self.config = write_config(WORK_DIR / "latency.yaml", a, b, spark, wide, every)
        standalone = {
            "master": f"spark://127.0.0.1:{args.spark_master_port}",
            "conf": {"spark.executor.memory": "512m", "spark.executor.extraJavaOptions": QUICK_JVM},
        }
        self.standalone_config = write_config(WORK_DIR / "latency-standalone.yaml", a, b, standalone, wide, every)
        connect = {"remote": f"sc://127.0.0.1:{args.spark_connect_port}"}
        self.connect_config = write_config(WORK_DIR / "latency-connect.yaml", a, b, connect, every_link=every)
        # Every link stays in it (one with mirrors cannot leave the config); only the sensor's runs by itself.
        sensor = {"dagster.automation.running": True, "dagster.lag.sensor.interval.seconds": args.sensor_interval}
        self.sensor_config = write_config(
            WORK_DIR / "latency-sensor.yaml",
            a,
            b,
            connect,
            {link: {} for link in LINKS.values()} | {LINKS["sensor"]: sensor},
            every,
        )

    def source_topic(self, mode: str) -> str:
        topic = f"lat-{mode}-{self.run_id}"
        create_topic(self.a_admin, topic, self.args.partitions)
        return topic

    def mirror(self, config: Path, mode: str, topic: str) -> str:
        mirror = engine.create_mirror(load_config(config), LINKS[mode], topic).mirror_topic
        wait_for_leaders(self.b_admin, mirror, self.args.partitions)  # a wide mirror's take a while
        return mirror

    def copier(self, mode: str) -> Copier:
        return self.wide_copier(mode) if self.args.topics > 1 else self.narrow_copier(mode)

    def wide_copier(self, mode: str) -> Copier:
        """--topics source topics for the mode, mirrored the way a wide link is: auto-create (the link's
        filter selects the mode's prefix) for follow, MM2's topic pattern for MM2."""
        prefix = wide_prefix(mode, self.run_id)
        sources = [f"{prefix}{i:04d}" for i in range(self.args.topics)]
        say(f"{mode}: creating {len(sources):,} source topics of {self.args.partitions} partitions")
        create_topics(self.a, sources, self.args.partitions)
        if mode == "mm2":
            # MM2 creates the remote topics it lacks in one CreateTopics request: for 1,000 topics of 10
            # partitions Kafka 4's controller refuses it ("Unable to perform excessively large batch
            # operation": over 10,000 metadata records), and MM2 tries again at its next topic refresh,
            # 600 s later, copying nothing meanwhile. Its users create them first, in smaller requests.
            remote = [f"a.{t}" for t in sources]
            create_topics(self.b, remote, self.args.partitions)
            return Mm2(WORK_DIR / "mm2", self.a, self.b, f"{prefix}.*").spread_over(sources, remote)
        config = self.standalone_config if mode == "follow-standalone" else self.config
        t0, loaded = time.monotonic(), load_config(config)
        engine.auto_create(loaded, LINKS[mode])
        by_source = {m.source_topic: m.mirror_topic for m in engine.list_mirrors(loaded, LINKS[mode])}
        missing = [t for t in sources if t not in by_source]
        if missing:
            raise SystemExit(f"{mode}: auto-create made no mirror of {len(missing):,} topics, {missing[0]} first")
        mirrors = [by_source[t] for t in sources]
        say(f"{mode}: auto-create made {len(sources):,} mirrors in {time.monotonic() - t0:.1f}s")
        # Measured once the destination lists them all: its broker lists the last of a thousand new
        # topics tens of seconds after auto-create returns, and the first epoch leaves out any mirror
        # it does not list yet (they join the next epoch, one --epoch-seconds later).
        listed_s = wait_until_listed(self.b_admin, mirrors, self.args.partitions, mode, timeout_s=300)
        say(f"{mode}: cluster b listed every mirror {listed_s:.1f}s later")
        follow = Follow(
            mode, config, LINKS[mode], sources[0], mirrors[0], WORK_DIR, self.args.epoch_seconds, self.args.stop_timeout
        )
        return follow.spread_over(sources, mirrors)

    def narrow_copier(self, mode: str) -> Copier:
        args, topic = self.args, self.source_topic(mode)
        if mode == "mm2":
            return Mm2(WORK_DIR / "mm2", self.a, self.b, topic)
        config = {
            "follow-standalone": self.standalone_config,
            "cycles-connect": self.connect_config,
            "sensor": self.sensor_config,
        }.get(mode, self.config)
        mirror = self.mirror(config, mode, topic)
        if mode == "sensor":
            return SensorRuns(mode, config, LINKS[mode], topic, mirror, WORK_DIR, args.ui_port)
        if mode in ("cycles", "scheduled", "cycles-connect"):
            period = args.schedule_seconds if mode == "scheduled" else None
            return CliCycles(mode, config, LINKS[mode], topic, mirror, WORK_DIR, period)
        return Follow(mode, config, LINKS[mode], topic, mirror, WORK_DIR, args.epoch_seconds, args.stop_timeout)


def measure(bench: Bench, copier: Copier, burst: bool) -> dict[str, Any]:
    """One mode: start the copier, (warm up), steady load, drain, (burst), stop; the figures."""
    args = bench.args
    if args.wait_quiet > 0:
        wait_until_quiet(args.wait_quiet)
    tracker = Tracker(bench.b, copier.mirrors, args.partitions)
    tracker.start()
    load = Load(bench.a, copier.sources, args.partitions, args.record_bytes)
    out: dict[str, Any] = {"topic": copier.source_topic, "mirror_topic": copier.mirror_topic}
    cpu = CpuSampler(bench.meter)
    cpu.start()
    copier.watch(tracker, load)
    copier.start(time.monotonic())
    try:
        drive(bench, copier, tracker, load, burst, out, cpu)
    finally:
        copier.stop()
        tracker.stop(linger_s=args.linger)  # late copies (duplicates) still count
        load.close()
        out["cpu_s"] = cpu.stop()
        out["load_cpu_s"] = cpu.between("load", "load-end")
        out["largest_process"] = cpu.largest()
    if "error" not in out:
        out["latency"] = phase_stats(load, tracker, MEASURED, args.window)
    out["warm_up"] = phase_stats(load, tracker, WARM)
    out["copier"] = copier.info()
    if tracker.error:
        out["tracker_error"] = tracker.error
    if tracker.foreign:
        out["foreign_records"] = tracker.foreign  # keys without a phase letter of ours: none expected
    return out


def drive(
    bench: Bench, copier: Copier, tracker: Tracker, load: Load, burst: bool, out: dict[str, Any], cpu: CpuSampler
) -> None:
    """The running copier's part of `measure`: warm-up, load, drain, burst; figures go into `out`, and
    `cpu` is marked at the steady load's start and end."""
    args = bench.args
    if copier.warm_up:
        out["start_up_s"] = load.warm_up(tracker.first_arrival, args.start_timeout, copier.alive)
        if out["start_up_s"] is None:
            why = "the copier exited" if not copier.alive() else f"none within {args.start_timeout:.0f}s"
            out["error"] = f"no record mirrored ({why})"
            return
        say(f"{copier.name}: first record mirrored {out['start_up_s']:.1f}s after the start")
        if args.warm_seconds > 0:
            # The steady load itself, unmeasured, the same for every copier: a freshly started copier's first
            # seconds at full rate (MM2 falls behind, then catches up) are part of its start, not of its
            # steady-state latency.
            say(f"{copier.name}: warm-up, {args.rate:g} records/s for {args.warm_seconds:g}s (not measured)")
            out["warm_load"] = load.paced(args.rate, args.warm_seconds, phase=WARM)
            out["warm_s"] = args.warm_seconds
    say(f"{copier.name}: {args.rate:g} records/s for {args.seconds:g}s to a:{copier.source_topic}")
    copier.started_load()
    cpu.mark("load")
    out["load"] = load.paced(args.rate, args.seconds)
    cpu.mark("load-end")
    copier.ended_load()
    t0 = time.monotonic()
    # An overloaded source may still owe acknowledgements when the load ends: the drain waits for
    # them too, or a record acknowledged after it would count as lost.
    if out["load"]["unacknowledged"]:
        out["load"]["unacknowledged_after_drain"] = load.await_acks(args.drain_timeout)
    out["drained"] = copier.drain(tracker, load, max(0.0, args.drain_timeout - (time.monotonic() - t0)))
    out["drain_s"] = round(time.monotonic() - t0, 2)
    say(f"{copier.name}: load done; everything mirrored: {out['drained']} ({out['drain_s']}s after the load)")
    if burst and out["drained"] and copier.alive():
        out["burst"] = follow_burst(bench, copier, tracker, copier.source_topic)


def follow_burst(bench: Bench, copier: Copier, tracker: Tracker, source: str) -> dict[str, Any]:
    """--burst-records as fast as possible into the followed topic; the rate at which they arrive."""
    n = bench.args.burst_records
    loader = Load(bench.a, source, bench.args.partitions, bench.args.record_bytes, BURST_PRODUCER)
    say(f"{copier.name}: burst of {n:,} records")
    begun = time.time() * 1000
    produced = loader.burst(n)
    done = tracker.wait_all(loader, BURST, bench.args.drain_timeout, copier.alive)
    return burst_figures(loader, tracker, produced, begun, done)


def burst_figures(loader: Load, tracker: Tracker, produced: dict, begun_ms: float, done: bool) -> dict[str, Any]:
    stats = phase_stats(loader, tracker, BURST)
    out = {
        "produced": produced,
        "all_arrived": done,
        **arrival_rate(tracker, BURST),
        "lost": stats.get("lost"),
        "duplicated": stats.get("duplicated"),
    }
    if tracker.logs[BURST].last_ms:
        out["burst_start_to_last_s"] = round((tracker.logs[BURST].last_ms - begun_ms) / 1000, 2)
        # Near 0: the copier kept pace with the producer, and the rate above is the producer's.
        out["after_produced_s"] = round(out["burst_start_to_last_s"] - produced["seconds"], 2)
    say(f"burst: {out['records']:,} records arrived at {out['records_per_s']} records/s (first -> last arrival)")
    return out


def burst_cycle(bench: Bench) -> dict[str, Any]:
    """The same burst copied by one `run --link` process (the cold process, Spark start included)."""
    args = bench.args
    if args.wait_quiet > 0:
        wait_until_quiet(args.wait_quiet)
    topic = bench.source_topic("burst")
    mirror = bench.mirror(bench.config, "burst-cycle", topic)
    tracker = Tracker(bench.b, mirror, args.partitions)
    tracker.start()
    loader = Load(bench.a, topic, args.partitions, args.record_bytes, BURST_PRODUCER)
    say(f"burst-cycle: {args.burst_records:,} records, then one `run --link {LINKS['burst-cycle']}`")
    begun = time.time() * 1000
    produced = loader.burst(args.burst_records)
    run = CliCycles("burst-cycle", bench.config, LINKS["burst-cycle"], topic, mirror, WORK_DIR).run_once()
    done = tracker.wait_all(loader, BURST, 30.0)
    tracker.stop(linger_s=args.linger)
    loader.close()
    out = {"run": run, **burst_figures(loader, tracker, produced, begun, done)}
    if run.get("records"):
        out["records_per_s_process"] = round(run["records"] / run["wall_s"], 1)
    return out


def run_mode(bench: Bench, mode: str, follow: dict[str, Any]) -> dict[str, Any]:
    if mode == "mm2" and not mm2_class_present():
        return {"skipped": "MirrorMaker 2 is not in the Kafka jars"}
    if mode.startswith("follow") and not follow["follow"]:
        return {"skipped": "`mirror-pipeline run --help` has no --follow"}
    if mode in ON_STANDALONE:
        return with_standalone_spark(bench, mode, lambda: measure(bench, bench.copier(mode), burst=False))
    return measure(bench, bench.copier(mode), burst=mode == "follow" and bench.args.burst_records > 0)


def with_standalone_spark(bench: Bench, mode: str, fn) -> dict[str, Any]:
    """A master and two workers (and the Connect server `local spark up` brings) around `fn`, then down."""
    spark = LocalSpark(WORK_DIR / "spark", bench.args.spark_master_port, bench.args.spark_connect_port)
    say(f"{mode}: starting the local Spark cluster ({spark.master_url}, Connect {spark.connect_url})")
    t0 = time.monotonic()
    try:
        spark.up()
    except Exception as exc:  # noqa: BLE001 - the mode is reported as not measured, the others stand
        spark.down()
        return {"error": f"local Spark cluster did not start: {exc}"}
    up_s = round(time.monotonic() - t0, 1)
    try:
        return {"spark_cluster_up_s": up_s, "spark_master": spark.master_url, **fn()}
    finally:
        spark.down()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=180, help="steady load per mode (default 180)")
    ap.add_argument("--rate", type=float, default=2000, help="records/s of the steady load (default 2000)")
    ap.add_argument(
        "--warm-seconds",
        type=float,
        default=30,
        help="modes measured once running: the steady load runs this long after the first record "
        "arrived before the measured load (default 30; 0: measure from the first arrival)",
    )
    ap.add_argument("--record-bytes", type=int, default=1024, help="value size (default 1024; keys are 11 bytes)")
    ap.add_argument("--partitions", type=int, default=8, help="partitions per topic (default 8)")
    ap.add_argument(
        "--topics",
        type=int,
        default=1,
        help="source topics per mode (default 1); more spread the load over all their partitions, "
        f"and only the modes {', '.join(WIDE_MODES)} run, without a burst",
    )
    ap.add_argument("--modes", default=",".join(MODES), help=f"modes to run, in this order (default {','.join(MODES)})")
    ap.add_argument("--skip", default="", help="modes to leave out, comma separated")
    ap.add_argument("--epoch-seconds", type=float, default=None, help="follow's --epoch-seconds (default: the CLI's)")
    ap.add_argument(
        "--writer-slots", type=int, default=None, help="every link's mirror.writer.slots (default: the setting's, 16)"
    )
    ap.add_argument("--schedule-seconds", type=float, default=60, help="cadence of the scheduled mode (default 60)")
    ap.add_argument("--burst-records", type=int, default=200_000, help="burst after follow's run; 0: none")
    ap.add_argument("--drain-timeout", type=float, default=300, help="after the load, wait this long for the rest")
    ap.add_argument("--start-timeout", type=float, default=300, help="MM2/follow: wait this long for a first record")
    ap.add_argument("--stop-timeout", type=float, default=300, help="follow: SIGKILL this long after SIGTERM")
    ap.add_argument("--linger", type=float, default=3, help="listen this long after stopping a copier (duplicates)")
    ap.add_argument("--window", type=float, default=10, help="seconds per window of the latency timeline")
    ap.add_argument(
        "--spark-master",
        default=None,
        help="spark.master of the local modes (default: the engine's, two task slots per core)",
    )
    ap.add_argument("--spark-master-port", type=int, default=SPARK_MASTER_PORT)
    ap.add_argument("--spark-connect-port", type=int, default=SPARK_CONNECT_PORT)
    ap.add_argument(
        "--sensor-interval",
        type=int,
        default=5,
        help="the sensor mode's dagster.lag.sensor.interval.seconds (default 5, the least it takes)",
    )
    ap.add_argument("--ui-port", type=int, default=UI_PORT, help=f"the sensor mode's Dagster webserver ({UI_PORT})")
    ap.add_argument("--base-port", type=int, default=BASE_PORT, help=f"cluster a's port; b's is +10000 ({BASE_PORT})")
    ap.add_argument("--keep-clusters", action="store_true", help="leave the pair running (and its data) at the end")
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each mode, wait up to this long for other processes to leave the CPUs idle",
    )
    ap.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    ap.add_argument("--json-file", type=Path, metavar="PATH", help="also write the JSON document to PATH")
    args = ap.parse_args(argv)
    skip = {m.strip() for m in args.skip.split(",") if m.strip()}
    args.mode_list = [m.strip() for m in args.modes.split(",") if m.strip() and m.strip() not in skip]
    unknown = set(args.mode_list) - set(MODES)
    if unknown:
        ap.error(f"unknown mode(s) {', '.join(sorted(unknown))}; choose from {', '.join(MODES)}")
    if args.topics < 1:
        ap.error(f"--topics must be 1 or more, not {args.topics}")
    if args.topics > 1:
        narrow_only = [m for m in args.mode_list if m not in WIDE_MODES]
        if narrow_only:
            ap.error(
                f"--topics {args.topics}: modes {', '.join(narrow_only)} run on one topic; use --modes with "
                f"{', '.join(WIDE_MODES)}"
            )
        if args.burst_records:
            ap.error(f"--topics {args.topics}: the burst runs on one topic; add --burst-records 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    run_id = time.strftime("%H%M%S") + "-" + uuid.uuid4().hex[:4]
    shutil.rmtree(WORK_DIR, ignore_errors=True)
    WORK_DIR.mkdir(parents=True)
    follow = follow_options()
    say(
        f"`run --help`: --follow {'present' if follow['follow'] else 'ABSENT'}; --epoch-seconds "
        f"{'present' if follow['epoch_seconds'] else 'absent'} (default {follow.get('epoch_seconds_default', '?')})"
    )
    report: dict[str, Any] = {
        "params": {
            "seconds": args.seconds,
            "warm_seconds": args.warm_seconds,
            "rate": args.rate,
            "record_bytes": args.record_bytes,
            "partitions": args.partitions,
            "topics": args.topics,
            "modes": args.mode_list,
            "schedule_seconds": args.schedule_seconds,
            "sensor_interval": args.sensor_interval,
            "burst_records": args.burst_records,
            "epoch_seconds": args.epoch_seconds,
            "writer_slots": args.writer_slots or DEFAULT_WRITER_SLOTS,
            "cli_follow": follow,
            "cpus": os.cpu_count(),
            "spark_master": args.spark_master or default_local_master(),
            "work_dir": str(WORK_DIR),
        },
        "modes": {},
    }
    with local_clusters(BENCH_ROOT, args.keep_clusters, args.base_port) as lk:
        a, b = lk.bootstraps
        for boot in lk.bootstraps:
            warm_up(boot)
        meter = CpuMeter({"broker-a": lk.root / lk.names[0], "broker-b": lk.root / lk.names[1]})
        bench = Bench(args, a, b, meter, run_id)
        for mode in args.mode_list:
            say(f"=== {mode}")
            report["modes"][mode] = run_mode(bench, mode, follow)
            if mode == "follow" and args.burst_records > 0:
                say("=== burst-cycle (the follow burst, copied by one `run --link` process)")
                report["burst_cycle"] = burst_cycle(bench)
        del bench
    if args.json_file:
        args.json_file.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2) if args.json else render_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
