#!/usr/bin/env python
"""Scale benchmark: a cycle's fixed cost on a link of 1,000 mirrored partitions, and whether it grows with history.

    .venv/bin/python benchmarks/scale.py [--topics 100] [--partitions 10] [--history-cycles 1000]
        [--keep-clusters] [--attach] [--json-file PATH] ...

Starts its own pair of local single-node clusters (`.local-kafka/bench-scale`,
ports 15592/25592, away from the demo's 19092, the tests' 11592/21592/31592
and 12592/22592 and the other benchmarks), creates `--topics` source topics
of `--partitions` partitions each with a few records per partition, mirrors
them all on one link, copies them, and then measures, in one process:

1. round "fresh": the time of an empty cycle, of a planning pass alone, of a
   cycle copying one record to every partition, of `describe` of one mirror
   and of listing (in this process, and as a `mirror-pipeline` command, i.e. a
   fresh process), of the lag the lag sensor computes, and the driver's peak
   RSS;
2. history: `--history-cycles` real cycles, each copying a few records to
   the same few busy partitions, so that every cycle writes offset-map
   segments and those partitions' segments get consolidated (merged, the
   parts deleted): the link's history grows;
3. round "after history": the measurements of round 1 again.

With `--attach` it skips the setup and works on the clusters and link a run
with `--keep-clusters` left behind (and leaves them running): so another
checkout of the engine (`--root` then names this one's cluster directory) is
measured on the same link and the same history.

The engine's state reads go through `link.compacted_view` when it exists (a
process keeps what it read and fetches only the tail); the rows marked
"fresh process" clear those views first, which is what every read cost before
that module existed (and what a new process pays once). Progress goes to
stderr, the table to stdout. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from benchmarks.common import QUIET, admin_for, create_topic, local_clusters, say, warm_up  # noqa: E402
from benchmarks.throughput import PhaseTimer  # noqa: E402
from mirror_pipeline import engine  # noqa: E402
from mirror_pipeline.config.loader import load_config  # noqa: E402
from mirror_pipeline.kafka import clients as kc  # noqa: E402
from mirror_pipeline.link.context import LinkContext  # noqa: E402
from mirror_pipeline.model.states import NO_COPY_FLAGS, WATCHED  # noqa: E402
from mirror_pipeline.replication.planner import plan_cycle  # noqa: E402

try:  # the engine before incremental state reads has no views to clear
    from mirror_pipeline.link import compacted_view  # noqa: E402
except ImportError:
    compacted_view = None

BENCH_ROOT = REPO / ".local-kafka" / "bench-scale"  # --root
BASE_PORT = 15592
LINK = "a-to-b"


# --- setup ----------------------------------------------------------------------


def topic_names(n: int) -> list[str]:
    return [f"scale-{i:03d}" for i in range(n)]


def write_config(path: Path, a: str, b: str, spark_master: str | None, chunk_records: int | None) -> Path:
    link: dict[str, Any] = {"source": "a", "destination": "b"}
    if chunk_records:
        link["mirror.chunk.max.records"] = chunk_records
    data: dict[str, Any] = {
        "clusters": {"a": {"bootstrap.servers": a}, "b": {"bootstrap.servers": b}},
        "links": {LINK: link},
    }
    if spark_master:
        data["spark"] = {"master": spark_master}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Loader:
    """One producer that writes `n` small records to chosen partitions, acknowledged before it returns."""

    def __init__(self, bootstrap: str):
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": QUIET})
        self.sent = 0

    def write(self, targets: list[tuple[str, int]], n: int) -> None:
        for topic, partition in targets:
            for _ in range(n):
                self.p.produce(topic, key=b"k%d" % self.sent, value=b"v" * 100, partition=partition)
                self.sent += 1
            self.p.poll(0)
        if self.p.flush(60):
            raise RuntimeError("loading the source: records left unacknowledged after 60 s")


# --- measurements ---------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def forget_views() -> None:
    if compacted_view is not None:
        compacted_view.forget()


def plan_only(cfg) -> int:
    """What `run_cycle` does before its Spark job: read the registry, select, plan. Units planned."""
    ctx = LinkContext.open(cfg, LINK)
    ctx.check_destination()
    selected = [m for m in ctx.registry().values() if m.state in WATCHED and not NO_COPY_FLAGS & set(m.flags)]
    return len(plan_cycle(ctx, selected).units)


def cli(config_path: Path, *args: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mirror_pipeline", *args, "--link", LINK, "--config", str(config_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if out.returncode:
        raise RuntimeError(f"mirror-pipeline {' '.join(args)} failed: {out.stdout[-500:]} {out.stderr[-500:]}")


def state_size(cfg) -> dict[str, int]:
    """How much history the state topics hold: their end offsets, and this link's live segments."""
    ctx = LinkContext.open(cfg, LINK)
    ctx.registry()  # tells which offset-map topic the link's maps are in
    store = ctx.store
    ends = kc.list_offsets(
        ctx.dest_admin,
        [(store.offset_map_topic, 0), (store.state_topic, 0)],
        "latest",
        ctx.dest.alias,
        read_committed=False,
    )
    segments = store.read_segments().segments
    return {
        "offset_map_end": ends[(store.offset_map_topic, 0)],
        "state_end": ends[(store.state_topic, 0)],
        "live_segments": sum(len(v) for v in segments.values()),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure_round(
    name: str,
    cfg,
    config_path: Path,
    spark,
    loader: Loader,
    targets: list[tuple[str, int]],
    timer: PhaseTimer,
    repeat: int,
    copy_cycle: bool,
) -> dict:
    """Every measurement once per repetition; medians (and all runs) in seconds, wall clock and
    this process's CPU (all its threads: librdkafka's too), which a busy neighbour moves much less."""
    say(f"round '{name}': measuring ({repeat} repetitions)")
    out: dict[str, Any] = {"state": state_size(cfg)}
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def measure(key: str, fn: Callable[[], Any], fresh_process: bool = False) -> Any:
        if fresh_process:
            forget_views()
        c0 = time.process_time()
        seconds, result = timed(fn)
        runs.setdefault(key, []).append(round(seconds, 3))
        cpu.setdefault(key, []).append(round(time.process_time() - c0, 3))
        return result

    first_mirror = sorted({t for t, _ in targets})[0]
    for i in range(repeat):
        timer.take()
        result = measure("empty_cycle", lambda: engine.run_cycle(cfg, LINK, spark))
        if result.records:
            say(f"WARNING: an empty cycle copied {result.records} records")
        runs.setdefault("empty_cycle_plan", []).append(timer.take().get("plan", 0.0))
        measure("plan_only", lambda: plan_only(cfg))
        measure("describe_one", lambda: engine.describe_mirror(cfg, LINK, first_mirror))
        measure("list", lambda: engine.list_mirrors(cfg, LINK))
        measure("lags", lambda: engine.mirror_lags(cfg, LINK))
        if compacted_view is not None:
            measure("empty_cycle_fresh_process", lambda: engine.run_cycle(cfg, LINK, spark), fresh_process=True)
            measure("plan_only_fresh_process", lambda: plan_only(cfg), fresh_process=True)
            measure("lags_fresh_process", lambda: engine.mirror_lags(cfg, LINK), fresh_process=True)
        if i == 0:  # fresh processes: the command line as an operator runs it (its CPU is not this process's)
            runs.setdefault("cli_describe_one", []).append(
                round(timed(lambda: cli(config_path, "mirror", "describe", first_mirror))[0], 3)
            )
            runs.setdefault("cli_list", []).append(round(timed(lambda: cli(config_path, "mirror", "list"))[0], 3))
    if copy_cycle:  # one record to every partition, then one cycle copies them all
        loader.write(targets, 1)
        timer.take()
        secs, result = timed(lambda: engine.run_cycle(cfg, LINK, spark))
        steps = timer.take()
        if result.records != len(targets):
            say(f"WARNING: the copy cycle copied {result.records} records, expected {len(targets)}")
        out["copy_cycle"] = {
            "seconds": round(secs, 3),
            "records": result.records,
            "work_units": result.work_units,
            "steps_s": steps,
        }
    out["runs_s"], out["cpu_runs_s"] = runs, cpu
    out["median_s"] = {k: round(statistics.median(v), 3) for k, v in runs.items()}
    out["median_cpu_s"] = {k: round(statistics.median(v), 3) for k, v in cpu.items()}
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    # Everything shares the machine's cores: a busy neighbour slows every figure of the round.
    out["load_average"] = round(os.getloadavg()[0], 1)
    say(
        f"round '{name}': medians {out['median_s']}; copy cycle {out.get('copy_cycle', 'skipped')}; "
        f"state {out['state']}"
    )
    return out


def grow_history(
    cfg,
    spark,
    loader: Loader,
    targets: list[tuple[str, int]],
    cycles: int,
    per_cycle: int,
    records: int,
    timer: PhaseTimer,
) -> dict:
    """`cycles` real cycles, each copying `records` records to the same `per_cycle` busy partitions
    (spread over the topics), whose segments are therefore consolidated every few cycles."""
    walls: list[float] = []
    plans: list[float] = []
    started = time.perf_counter()
    step = max(1, len(targets) // per_cycle)
    chosen = [targets[(j * step) % len(targets)] for j in range(per_cycle)]
    for i in range(cycles):
        loader.write(chosen, records)
        timer.take()
        secs, result = timed(lambda: engine.run_cycle(cfg, LINK, spark))
        steps = timer.take()
        walls.append(round(secs, 3))
        plans.append(round(steps.get("plan", 0.0), 3))
        if result.records != per_cycle * records:
            say(f"WARNING: history cycle {i + 1} copied {result.records} records, expected {per_cycle * records}")
        if (i + 1) % 50 == 0 or i + 1 == cycles:
            window = walls[-50:]
            say(
                f"history: {i + 1}/{cycles} cycles in {time.perf_counter() - started:.0f}s; last 50: cycle median "
                f"{statistics.median(window):.2f}s, plan median {statistics.median(plans[-50:]):.3f}s"
            )
    head, tail = slice(0, min(50, cycles)), slice(max(0, cycles - 50), cycles)
    return {
        "cycles": cycles,
        "seconds": round(time.perf_counter() - started, 1),
        "cycle_median_first_50_s": round(statistics.median(walls[head]), 3) if walls else None,
        "cycle_median_last_50_s": round(statistics.median(walls[tail]), 3) if walls else None,
        "plan_median_first_50_s": round(statistics.median(plans[head]), 3) if plans else None,
        "plan_median_last_50_s": round(statistics.median(plans[tail]), 3) if plans else None,
        "cycle_walls_s": walls,
        "plan_s": plans,
    }


# --- the run ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--topics", type=int, default=100, help="source topics (default 100)")
    ap.add_argument("--partitions", type=int, default=10, help="partitions per topic (default 10)")
    ap.add_argument("--initial-records", type=int, default=5, help="records per partition before mirroring (default 5)")
    ap.add_argument("--history-cycles", type=int, default=1000, help="cycles between the two rounds (default 1000)")
    ap.add_argument(
        "--history-partitions", type=int, default=4, help="busy partitions each history cycle copies to (default 4)"
    )
    ap.add_argument(
        "--history-records", type=int, default=5, help="records per busy partition per history cycle (default 5)"
    )
    ap.add_argument(
        "--chunk-records",
        type=int,
        default=1,
        help="the link's mirror.chunk.max.records (default 1: every record copied writes its own "
        "offset-map segment, so history grows as on a busy link without copying much; 0: engine default)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of each measurement per round (default 3)")
    ap.add_argument("--keep-clusters", action="store_true", help="leave the pair running (and its data) at the end")
    ap.add_argument(
        "--attach",
        action="store_true",
        help="no setup: use the pair and link a --keep-clusters run left in --root (and leave them running)",
    )
    ap.add_argument("--root", type=Path, default=BENCH_ROOT, help=f"the clusters' directory (default {BENCH_ROOT})")
    ap.add_argument(
        "--skip-copy-cycle",
        action="store_true",
        help="leave out the cycle that copies one record to every partition (minutes on 2 cores)",
    )
    ap.add_argument(
        "--base-port",
        type=int,
        default=BASE_PORT,
        help=f"broker port of cluster a; b is this + 10000 (default {BASE_PORT})",
    )
    ap.add_argument(
        "--spark-master", default=None, help="spark.master (default: the engine's, two task slots per core)"
    )
    ap.add_argument("--json-file", type=Path, metavar="PATH", help="also write the JSON document to PATH")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    names = topic_names(args.topics)
    targets = [(t, p) for t in names for p in range(args.partitions)]
    report: dict[str, Any] = {
        "params": {
            "topics": args.topics,
            "partitions": len(targets),
            "history_cycles": args.history_cycles,
            "history_partitions": args.history_partitions,
            "history_records": args.history_records,
            "repeat": args.repeat,
            "cpus": os.cpu_count(),
            "incremental_state_reads": compacted_view is not None,
            "engine": str(Path(engine.__file__).resolve().parents[1]),
            "attach": args.attach,
            "chunk_records": args.chunk_records,
        }
    }
    root = args.root.resolve()
    with (
        attached(root, args.base_port)
        if args.attach
        else local_clusters(root, args.keep_clusters, args.base_port) as lk
    ):
        a_boot, b_boot = lk.bootstraps
        config_path = write_config(
            root.parent / f"{root.name}.yaml", a_boot, b_boot, args.spark_master, args.chunk_records or None
        )
        cfg = load_config(config_path)
        loader = Loader(a_boot)
        if not args.attach:
            for boot in lk.bootstraps:
                warm_up(boot)
            a_admin = admin_for(a_boot)
            secs, _ = timed(lambda: [create_topic(a_admin, t, args.partitions) for t in names])
            say(f"setup: {len(names)} source topics x {args.partitions} partitions in {secs:.0f}s")
            loader.write(targets, args.initial_records)
            secs, _ = timed(lambda: [engine.create_mirror(cfg, LINK, t) for t in names])
            report["create_mirrors_s"] = round(secs, 1)
            say(f"setup: {len(names)} mirrors created in {secs:.0f}s")
        elif len(engine.list_mirrors(cfg, LINK)) != len(names):
            raise SystemExit(
                f"--attach: link {LINK} on {b_boot} has not the {len(names)} mirrors of this run's "
                f"settings; run once with --keep-clusters first"
            )
        from mirror_pipeline.replication.spark_runner import spark_session

        secs, spark = timed(lambda: spark_session(cfg.spark))
        say(f"Spark session up in {secs:.1f}s (master {spark.sparkContext.master})")
        timer = PhaseTimer(keep_units=False)
        timer.install()
        try:
            secs, result = timed(lambda: engine.run_cycle(cfg, LINK, spark))
            report["first_cycle"] = {
                "seconds": round(secs, 3),
                "records": result.records,
                "work_units": result.work_units,
                "steps_s": timer.take(),
            }
            say(f"first cycle: {result.records} records, {result.work_units} units in {secs:.1f}s")
            rounds = report["rounds"] = {}
            first = "fresh" if not args.attach else "measured"
            rounds[first] = measure_round(
                first, cfg, config_path, spark, loader, targets, timer, args.repeat, not args.skip_copy_cycle
            )
            if args.history_cycles:
                report["history"] = grow_history(
                    cfg,
                    spark,
                    loader,
                    targets,
                    args.history_cycles,
                    args.history_partitions,
                    args.history_records,
                    timer,
                )
                rounds["after history"] = measure_round(
                    "after history",
                    cfg,
                    config_path,
                    spark,
                    loader,
                    targets,
                    timer,
                    args.repeat,
                    not args.skip_copy_cycle,
                )
        finally:
            timer.uninstall()
            spark.stop()
        report["peak_rss_mb"] = round(peak_rss_mb(), 1)
    if args.json_file:
        args.json_file.write_text(json.dumps(report, indent=2) + "\n")
    print(render_table(report))
    return 0


class attached:
    """The pair a `--keep-clusters` run left running, left running again at the end."""

    def __init__(self, root: Path, base_port: int):
        from mirror_pipeline.local.clusters import LocalKafka

        self.root = root
        self.lk = LocalKafka(root, count=2, base_port=base_port)

    def __enter__(self):
        if not all(info.running for info in self.lk.status()):
            raise SystemExit(f"--attach: no running pair in {self.root}; run once with --keep-clusters first")
        return self.lk

    def __exit__(self, *exc):
        return False


ROWS = [
    ("empty_cycle", "empty cycle (run_cycle, nothing to copy)"),
    ("empty_cycle_plan", "  of which planning (plan_cycle)"),
    ("empty_cycle_fresh_process", "empty cycle, fresh process (views cleared)"),
    ("plan_only", "planning pass (registry + plan_cycle)"),
    ("plan_only_fresh_process", "planning pass, fresh process (views cleared)"),
    ("describe_one", "describe one mirror (engine, this process)"),
    ("cli_describe_one", "`mirror describe` one mirror (CLI process)"),
    ("list", "list mirrors (engine, this process)"),
    ("cli_list", "`mirror list` (CLI process)"),
    ("lags", "lag of every mirror (lag sensor's mirror_lags)"),
    ("lags_fresh_process", "lag of every mirror, fresh process (views cleared)"),
]


def render_table(r: dict) -> str:
    p = r["params"]
    rounds = r.get("rounds", {})
    names = list(rounds)
    W = 52
    lines = [
        f"mirror-pipeline scale: {p['topics']} topics, {p['partitions']:,} mirrored partitions, "
        f"{p['cpus']} CPUs shared by both brokers, Spark and the driver; "
        f"incremental state reads: {'yes' if p['incremental_state_reads'] else 'no'}",
        f"engine: {p['engine']}",
        "",
        f"{'median seconds: wall (driver CPU)':<{W}}" + "".join(f"{n:>18}" for n in names),
        "-" * (W + 18 * len(names)),
    ]

    def cell(n: str, key: str) -> str:
        wall, cpu = rounds[n]["median_s"].get(key), rounds[n].get("median_cpu_s", {}).get(key)
        return "" if wall is None else f"{wall:.3f}" + ("" if cpu is None else f" ({cpu:.3f})")

    for key, label in ROWS:
        cells = [cell(n, key) for n in names]
        if any(cells):
            lines.append(f"{label:<{W}}" + "".join(f"{c:>18}" for c in cells))
    copies = [rounds[n].get("copy_cycle") for n in names]
    if any(copies):
        for label, fig in (
            ("cycle copying 1 record to every partition", lambda c: c["seconds"]),
            ("  of which planning", lambda c: c["steps_s"].get("plan", 0.0)),
            ("  of which the Spark job", lambda c: c["steps_s"].get("spark_job", 0.0)),
        ):
            lines.append(f"{label:<{W}}" + "".join(f"{'' if c is None else f'{fig(c):.2f}':>18}" for c in copies))
    lines.append(
        f"{'offset-map topic end offset (history)':<{W}}"
        + "".join(f"{rounds[n]['state']['offset_map_end']:>18,}" for n in names)
    )
    lines.append(
        f"{'live segments of the link':<{W}}" + "".join(f"{rounds[n]['state']['live_segments']:>18,}" for n in names)
    )
    lines.append(f"{'driver peak RSS so far (MB)':<{W}}" + "".join(f"{rounds[n]['peak_rss_mb']:>18.0f}" for n in names))
    lines.append(
        f"{'machine load average (1 min) at the end':<{W}}"
        + "".join(f"{rounds[n]['load_average']:>18.1f}" for n in names)
    )
    lines.append("")
    if "create_mirrors_s" in r:
        lines.append(
            f"setup: {p['topics']} mirrors created in {r['create_mirrors_s']:.1f} s; first cycle "
            f"({r['first_cycle']['records']:,} records, {r['first_cycle']['work_units']:,} units) "
            f"{r['first_cycle']['seconds']:.1f} s (steps {r['first_cycle']['steps_s']})"
        )
    h = r.get("history")
    if h:
        lines.append(
            f"history: {h['cycles']:,} cycles of {p['history_records']} records to the same "
            f"{p['history_partitions']} partitions each (chunk {p['chunk_records'] or 'default'}), in "
            f"{h['seconds']:.0f} s; cycle median first 50 / last 50: "
            f"{h['cycle_median_first_50_s']:.2f} / {h['cycle_median_last_50_s']:.2f} s; planning median "
            f"first 50 / last 50: {h['plan_median_first_50_s']:.3f} / {h['plan_median_last_50_s']:.3f} s"
        )
    lines.append(f"driver peak RSS: {r['peak_rss_mb']:.0f} MB")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
