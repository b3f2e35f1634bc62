"""librdkafka's ListOffsets leader look-up against itself: crashes and time, unguarded and as the engine asks.

Several processes at once each make a new admin client that knows one topic's
leaders (as a copy task's does), list the latest offsets of every partition of
a wide cluster, and do it again, `--rounds` times. Unguarded, the requests of
500 partitions go side by side, as the engine sent them before
`mirror_pipeline.kafka.leader_lookups`: librdkafka (2.15, 2.16) can then crash
the process (a segmentation fault in its leader look-up). Guarded, through
`kc.list_offsets`: one request at a time while leaders are looked up.

It prints, per way, how many processes died of a signal and the median time a
listing took. The figures come from the same machine and clusters in one
invocation, run one way after the other. Needs no Spark.

    .venv/bin/python benchmarks/offsets_race.py [--topics 1000] [--processes 4] [--rounds 60]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import QUIET, REPO, create_topics, local_clusters, say, warm_up  # noqa: E402

BENCH_ROOT = REPO / ".local-kafka" / "bench-offsets-race"
BASE_PORT = 18592
PARTITIONS = 10
BATCH = 500  # the engine's LIST_OFFSETS_BATCH
WAYS = ("unguarded", "guarded")


def list_rounds(way: str, bootstrap: str, rounds: int) -> None:
    """One process's part: `rounds` new admin clients, each listing every partition's latest offset."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from mirror_pipeline.kafka import clients as kc

    counts = kc.partition_counts(kc.admin_client({"bootstrap.servers": bootstrap}), "bench")
    wanted = [(t, p) for t, n in sorted(counts.items()) if t.startswith("race-") for p in range(n)]
    took = []
    for _ in range(rounds):
        admin = kc.admin_client({"bootstrap.servers": bootstrap})
        kc.learn_cluster(admin, wanted[0][0])
        started = time.perf_counter()
        if way == "guarded":
            kc.list_offsets(admin, wanted, "latest", "bench", read_committed=False)
        else:
            futures = {}
            for i in range(0, len(wanted), BATCH):
                batch = {TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted[i : i + BATCH]}
                futures.update(admin.list_offsets(batch, isolation_level=IsolationLevel.READ_UNCOMMITTED))
            for future in futures.values():
                future.result()
        took.append(time.perf_counter() - started)
    print(" ".join(f"{t:.4f}" for t in took))


def run_way(way: str, bootstrap: str, processes: int, rounds: int) -> tuple[int, list[float]]:
    """(processes that died of a signal, every listing's seconds) for one way, its processes side by side."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", way, bootstrap, str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(processes)
    ]
    crashed, took = 0, []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode < 0:
            crashed += 1
            say(f"{way}: a process died of {signal.Signals(-proc.returncode).name}")
        elif proc.returncode == 0:
            took.extend(float(t) for t in out.split())
        else:
            raise SystemExit(f"{way}: a process exited {proc.returncode}")
    return crashed, took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=1000, help=f"topics of {PARTITIONS} partitions (default 1000)")
    ap.add_argument("--processes", type=int, default=4, help="processes side by side (default 4)")
    ap.add_argument("--rounds", type=int, default=60, help="listings per process (default 60)")
    ap.add_argument("--keep-clusters", action="store_true", help="leave the pair running at the end")
    ap.add_argument("--child", nargs=3, metavar=("WAY", "BOOTSTRAP", "ROUNDS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        way, bootstrap, rounds = args.child
        list_rounds(way, bootstrap, int(rounds))
        return 0

    QUIET.setLevel("ERROR")
    with local_clusters(BENCH_ROOT, args.keep_clusters, BASE_PORT) as lk:
        a = lk.bootstraps[0]
        warm_up(a)
        create_topics(a, [f"race-{i:04d}" for i in range(args.topics)], PARTITIONS)
        say(f"setup: {args.topics} topics x {PARTITIONS} partitions")
        results = {way: run_way(way, a, args.processes, args.rounds) for way in WAYS}
    partitions = args.topics * PARTITIONS
    print(
        f"ListOffsets of {partitions:,} partitions on a new admin client, {args.processes} processes x "
        f"{args.rounds} rounds side by side"
    )
    print(f"{'way':<12}{'crashed':>10}{'listings':>10}{'median':>10}")
    for way, (crashed, took) in results.items():
        median = f"{statistics.median(took) * 1000:.0f} ms" if took else "-"
        print(f"{way:<12}{f'{crashed}/{args.processes}':>10}{len(took):>10}{median:>10}")
    return 1 if results["guarded"][0] else 0


if __name__ == "__main__":
    sys.exit(main())
