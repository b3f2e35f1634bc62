#!/usr/bin/env python
"""Verify benchmark: how fast `verify` compares a mirror with its source, next to how fast it was copied.

    .venv/bin/python benchmarks/verify.py [--records N] [--record-bytes B] [--partitions P]
        [--wait-quiet S] [--json] [--keep-clusters]

Starts its own pair of local single-node clusters (`.local-kafka/bench-verify`,
ports 19792/29792: away from the demo's 19092, the tests' 11592 and the other
benchmarks' 19892 and 19992), loads the same topic `throughput.py` loads
(1,000,000 x 1 KiB records, 8 partitions, one small header each), then, in one
Spark session already warmed by a no-op job, measures:

1. copy   -- `engine.create_mirror` + `engine.run_cycle` until the lag is 0;
2. verify -- `engine.verify_mirrors` over the whole mirror (sample 1.0): every
             record read from BOTH clusters and checksummed;
3. sample -- the same with `sample=0.1`, for scale.

Rates count source records per second (a verify reads each twice, once per
side). The goal is a full verify at least twice as fast as the copy. CPU
seconds per process group come from /proc, as in `throughput.py`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(REPO))

from benchmarks.common import admin_for, create_topic, local_clusters, say, warm_up  # noqa: E402
from benchmarks.throughput import (  # noqa: E402
    LOAD_PRODUCER,
    CpuMeter,
    Payloads,
    PhaseTimer,
    produce,
    rate,
    run_cycles_until_caught_up,
    wait_until_quiet,
    warm_job_overhead,
)
from mirror_pipeline import engine  # noqa: E402
from mirror_pipeline.config.loader import parse_config  # noqa: E402

BENCH_ROOT = REPO / ".local-kafka" / "bench-verify"
BASE_PORT = 19792
LINK = "a-to-b"  # run_cycles_until_caught_up copies this link


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--base-port", type=int, default=BASE_PORT)
    ap.add_argument("--keep-clusters", action="store_true")
    ap.add_argument(
        "--spark-master", default=None, help="spark.master (default: the engine's, two task slots per core)"
    )
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each measurement, wait up to this long for other processes to leave the CPUs idle",
    )
    ap.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    report = run(args)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0 if report["verify"]["identical"] else 1


def run(args) -> dict[str, Any]:
    n, parts = args.records, args.partitions
    payloads = Payloads(args.record_bytes)
    nbytes = payloads.payload_bytes(n)
    report: dict[str, Any] = {
        "params": {"records": n, "record_bytes": args.record_bytes, "partitions": parts, "payload_bytes": nbytes},
        "cpu_s": {},
    }
    with local_clusters(BENCH_ROOT, args.keep_clusters, args.base_port) as lk:
        a_boot, b_boot = lk.bootstraps
        for boot in lk.bootstraps:
            warm_up(boot)
        meter = CpuMeter({"broker-a": lk.root / lk.names[0], "broker-b": lk.root / lk.names[1]})

        @contextmanager
        def measured(name: str):
            if args.wait_quiet > 0:
                wait_until_quiet(args.wait_quiet, window_s=3.0)
            before = meter.snapshot()
            yield
            report["cpu_s"][name] = CpuMeter.delta(before, meter.snapshot())

        src = f"bench-verify-{uuid.uuid4().hex[:6]}"
        create_topic(admin_for(a_boot), src, parts)
        say(f"load: producing {n} x {args.record_bytes} B records to a:{src}")
        produce(a_boot, src, n, parts, payloads, LOAD_PRODUCER, "bench-loader")

        raw: dict[str, Any] = {
            "clusters": {"a": {"bootstrap.servers": a_boot}, "b": {"bootstrap.servers": b_boot}},
            "links": {LINK: {"source": "a", "destination": "b", "mirror.unit.max.bytes": 4 * 1024**3}},
        }
        if args.spark_master:
            raw["spark"] = {"master": args.spark_master}
        cfg = parse_config(raw, "bench")
        engine.create_mirror(cfg, LINK, src)
        from mirror_pipeline.replication.spark_runner import spark_session

        spark = spark_session(cfg.spark)
        try:
            # Both measurements run in a warm session: the first job's worker start-up is paid here.
            warm_job_overhead(spark, parts)
            with measured("copy"):
                t0 = time.perf_counter()
                cycles = run_cycles_until_caught_up(cfg, spark, PhaseTimer(), max_cycles=20)
                copy_s = time.perf_counter() - t0
            copied = sum(c["records"] for c in cycles)
            report["copy"] = {
                **rate(copied, sum(c["bytes"] for c in cycles), copy_s),
                "cycles": len(cycles),
                "lag_after": cycles[-1]["lag_after"],
            }
            say(f"copy: {report['copy']['records_per_s']:,.0f} records/s")
            report["verify"] = timed_verify(cfg, spark, src, 1.0, measured)
            report["verify_sample_0.1"] = timed_verify(cfg, spark, src, 0.1, measured)
        finally:
            spark.stop()
    report["ratio"] = round(report["verify"]["records_per_s"] / report["copy"]["records_per_s"], 2)
    return report


def timed_verify(cfg, spark, topic: str, sample: float, measured) -> dict[str, Any]:
    name = "verify" if sample >= 1 else f"verify_sample_{sample:g}"
    with measured(name):
        t0 = time.perf_counter()
        result = engine.verify_mirrors(cfg, LINK, spark, [topic], sample=sample)
        seconds = time.perf_counter() - t0
    mirror = result.mirrors[topic]
    out = {
        **rate(mirror.source_records, mirror.bytes_read // 2, seconds),
        "identical": mirror.identical,
        "tasks": result.tasks,
        "bytes_read_both_sides": mirror.bytes_read,
        "problem": mirror.problem(),
    }
    say(
        f"{name}: {out['records_per_s']:,.0f} records/s ({mirror.source_records:,} records, "
        f"{'identical' if mirror.identical else mirror.problem()})"
    )
    return out


def render(r: dict) -> str:
    p = r["params"]
    lines = [
        f"mirror-pipeline verify: {p['records']:,} records x {p['record_bytes']} B, {p['partitions']} partitions",
        "",
        f"{'measurement':<44} {'seconds':>8} {'records':>10} {'records/s':>11} {'CPU us/rec':>10}",
        "-" * 87,
    ]
    for key, label in (
        ("copy", "copy (run_cycle until lag 0, warm Spark)"),
        ("verify", "full verify (both sides read, sample 1.0)"),
        ("verify_sample_0.1", "sampled verify (sample 0.1)"),
    ):
        fig = r[key]
        roles = r["cpu_s"].get(key, {})
        ours = sum(v for k, v in roles.items() if k not in ("not-ours", "wall"))
        per = f"{ours / fig['records'] * 1e6:>10.1f}" if fig["records"] and roles else f"{'':>10}"
        lines.append(f"{label:<44} {fig['seconds']:>8.2f} {fig['records']:>10,} {fig['records_per_s']:>11,.0f} {per}")
    lines += [
        "-" * 87,
        f"full verify / copy speed: {r['ratio']:.2f}x (goal: >= 2x)",
        f"verify result: {'identical' if r['verify']['identical'] else r['verify']['problem']}",
        "",
        "CPU seconds per process group (not-ours = everything else on the machine):",
    ]
    lines += [
        f"  {phase:<18} " + ", ".join(f"{k} {v}" for k, v in roles.items()) for phase, roles in r["cpu_s"].items()
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
