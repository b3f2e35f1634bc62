#!/usr/bin/env python
"""A wide link as a new user meets it: the `mirror-pipeline` commands' wall time on T topics x P partitions.

    .venv/bin/python benchmarks/scale_cli.py [--topics 100] [--partitions 10] [--json-file PATH]
    .venv/bin/python benchmarks/scale_cli.py --topics 1000          # 10,000 partitions

Starts its own pair of local single-node clusters (`.local-kafka/bench-scale-cli`,
ports 16592/26592, away from the demo, the tests and the other benchmarks),
creates the source topics with `--initial-records` records in every
partition, writes a config whose link auto-creates a mirror for every one of
them, and times each command as an operator types it (a fresh process each,
start-up and Spark session included):

1. the first `run`: auto-create makes every mirror, and the cycle copies;
2. `mirror list`;
3. two more `run`s: the first copies the mirrors whose new topics the
   destination did not list yet at the first run (on a wide link), the
   second has nothing to copy;
4. one new record in every partition, written by one producer with the copy's
   writer settings and read back by one consumer, each timed as the row's
   reference (what the brokers allow for one record in each partition),
   then one `run`;
5. `mirror describe` of one mirror, and a tick of each of the link's sensors;
6. `link sync-configs` with nothing to change, then again after one config
   changed on every source topic;
7. `metrics show`, then `metrics serve` scraped over HTTP twice (the second
   scrape is a Prometheus server's steady state);
8. with `--groups G` (1,000 by default), G source consumer groups, each with
   offsets committed on one topic's partitions, then one `offsets sync`.

After the last run every mirror's log end offsets must equal its source's
(offsets are preserved), and every synced group's destination offsets the
ones it committed on the source: the exit status is 1 otherwise. Progress goes to
stderr, the table to stdout; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition  # noqa: E402

from benchmarks import sensor_ticks  # noqa: E402
from benchmarks.common import CREATE_BATCH, QUIET, admin_for, create_topics, local_clusters, say, warm_up  # noqa: E402
from benchmarks.scale import Loader, topic_names  # noqa: E402
from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS  # noqa: E402
from mirror_pipeline.kafka import clients as kc  # noqa: E402
from mirror_pipeline.kafka.topic_configs import describe_topics_configs, setting  # noqa: E402

BENCH_ROOT = REPO / ".local-kafka" / "bench-scale-cli"
BASE_PORT = 16592
LINK = "wide"
GROUP_PREFIX = "scale-group-"
# Offset a group commits on each partition of its topic (every partition holds more records).
GROUP_OFFSET = 3
# `metrics serve`'s port (below Linux's range for outgoing connections) and the config every source
# topic changes before the second config sync.
METRICS_PORT = 16590
CHANGED_CONFIG = ("retention.ms", "1209600000")
# `run`s after the first at most, waiting for one with nothing to copy.
MAX_NEXT_RUNS = 6


def write_config(path: Path, a: str, b: str, spark_master: str | None, writer_slots: int | None = None) -> Path:
    data: dict = {
        "clusters": {"a": {"bootstrap.servers": a}, "b": {"bootstrap.servers": b}},
        "links": {
            LINK: {
                "source": "a",
                "destination": "b",
                "auto.create.mirror.topics.enable": True,
                "auto.create.mirror.topics.filters": {
                    "topicFilters": [{"name": "scale-", "patternType": "PREFIXED", "filterType": "INCLUDE"}]
                },
                "consumer.offset.group.filters": {
                    "groupFilters": [{"name": GROUP_PREFIX, "patternType": "PREFIXED", "filterType": "INCLUDE"}]
                },
            }
        },
    }
    if spark_master:
        data["spark"] = {"master": spark_master}
    if writer_slots:
        data["links"][LINK]["mirror.writer.slots"] = writer_slots
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def commit_groups(bootstrap: str, names: list[str], partitions: int, groups: int) -> dict[str, str]:
    """`groups` consumer groups, group i with offset GROUP_OFFSET committed on every partition of
    topic i (mod the topics), as a consumer that stopped there leaves it; {group: its topic}."""
    admin = admin_for(bootstrap)
    topics = {f"{GROUP_PREFIX}{i:05d}": names[i % len(names)] for i in range(groups)}
    futures = [
        admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, GROUP_OFFSET) for p in range(partitions)])]
        )
        for group, topic in topics.items()
    ]
    for batch in futures:
        for fut in batch.values():
            fut.result(60)
    return topics


def groups_synced(b: str, topics: dict[str, str], partitions: int) -> tuple[int, int]:
    """(groups whose destination offsets are those committed on the source, groups checked)."""
    matched = 0
    for group, topic in topics.items():
        cons = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False, "logger": QUIET})
        try:
            got = cons.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        finally:
            cons.close()
        matched += all(tp.offset == GROUP_OFFSET for tp in got)
    return matched, len(topics)


# The end of each command's output, by command line, for the JSON document.
OUTPUTS: dict[str, dict[str, str]] = {}


def command(config_path: Path, *args: str) -> float:
    """Wall seconds of one `mirror-pipeline` command, a fresh process; fails the benchmark if it fails."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "mirror_pipeline", *args, "--config", str(config_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    seconds = time.perf_counter() - t0
    key = f"{' '.join(args)} ({len(OUTPUTS) + 1})"
    OUTPUTS[key] = {"head": out.stdout[:1000], "stdout": out.stdout[-3000:], "stderr": out.stderr[-3000:]}
    if out.returncode:
        raise SystemExit(
            f"mirror-pipeline {' '.join(args)} failed ({out.returncode}): {out.stdout[-1500:]} {out.stderr[-1500:]}"
        )
    say(f"mirror-pipeline {' '.join(args)}: {seconds:.2f} s")
    return round(seconds, 2)


def last_run_copied() -> bool:
    """Whether the last `run` copied any record (its summary line: "copied N records")."""
    said = re.search(r"copied ([\d,]+) records", list(OUTPUTS.values())[-1]["head"])
    return said is None or said.group(1) != "0"


def reference_write(bootstrap: str, targets: list[tuple[str, int]]) -> float:
    """Seconds one producer with the copy's writer settings takes to land one record in each of `targets`:
    the broker limit for the one-record row (librdkafka sends a ProduceRequest per partition, issue #1700)."""
    producer = kc.producer(kc.client_config({"bootstrap.servers": bootstrap}, LINK, "writer"))
    producer.list_topics(timeout=30)  # connected, the leaders known, before the clock starts
    t0 = time.perf_counter()
    for topic, partition in targets:
        producer.produce(topic, value=b"v" * 100, partition=partition)
        producer.poll(0)
    if producer.flush(120):
        raise SystemExit("reference write: records left unacknowledged after 120 s")
    return round(time.perf_counter() - t0, 2)


def reference_read(bootstrap: str, targets: list[tuple[str, int]]) -> float:
    """Seconds one consumer, assigned to each of `targets` at its last record, takes to read them all."""
    ends = kc.list_offsets(admin_for(bootstrap), targets, "latest", "a", read_committed=False, timeout=120)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-reference-read",
            "enable.auto.commit": False,
            "logger": QUIET,
        }
    )
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(t, p, ends[(t, p)] - 1) for t, p in targets])
    left = set(targets)
    while left and time.perf_counter() - t0 < 120:
        for msg in consumer.consume(10000, 0.5):
            if not msg.error():
                left.discard((msg.topic(), msg.partition()))
    consumer.close()
    if left:
        raise SystemExit(f"reference read: {len(left):,} partitions not read within 120 s")
    return round(time.perf_counter() - t0, 2)


def change_source_configs(bootstrap: str, names: list[str]) -> None:
    """Set CHANGED_CONFIG on every source topic (requests of CREATE_BATCH topics)."""
    name, value = CHANGED_CONFIG
    admin = admin_for(bootstrap)
    for i in range(0, len(names), CREATE_BATCH):
        resources = [setting(t, {name: value}) for t in names[i : i + CREATE_BATCH]]
        for fut in admin.incremental_alter_configs(resources).values():
            fut.result(60)
    # The broker applies a config change a moment after it acknowledges it: timed before every topic shows
    # it, a sync would change only some of them.
    deadline = time.monotonic() + 120
    while any(c.get(name) != value for c in describe_topics_configs(admin, names, "a").values()):
        if time.monotonic() > deadline:
            raise SystemExit(f"setup: {name}={value} not shown by every source topic after 120 s")
        time.sleep(1)


def scrapes(config_path: Path, port: int, count: int = 2) -> list[tuple[float, int]]:
    """(seconds, bytes) of `count` scrapes of `mirror-pipeline metrics serve`, a few seconds apart, once it answers."""
    args = ["metrics", "serve", "--config", str(config_path), "--port", str(port)]
    cmd = [sys.executable, "-m", "mirror_pipeline", *args]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=30).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    said = server.stderr.read()[-1500:] if server.stderr else ""
                    raise SystemExit(f"metrics serve did not answer: {said}") from None
                time.sleep(0.5)
        timed = []
        for _ in range(count):
            time.sleep(3)
            t0 = time.perf_counter()
            body = urllib.request.urlopen(url, timeout=60).read()
            timed.append((round(time.perf_counter() - t0, 2), len(body)))
        return timed
    finally:
        server.terminate()
        server.wait(30)


def mirrors_match(a: str, b: str, names: list[str], partitions: int) -> tuple[int, int]:
    """(partitions whose mirror's log end equals the source's, partitions checked)."""
    tps = [(t, p) for t in names for p in range(partitions)]
    src = kc.list_offsets(admin_for(a), tps, "latest", "a", read_committed=False, timeout=120)
    dst = kc.list_offsets(admin_for(b), tps, "latest", "b", read_committed=False, timeout=120)
    return sum(src[tp] == dst[tp] for tp in tps), len(tps)


ROWS = [
    ("first_run", "first `run`: auto-create makes every mirror, copies {initial} records a partition"),
    ("list", "`mirror list`"),
    ("empty_run_1", "the next `run`s (they copy the mirrors the first left, if any), in all"),
    ("empty_run_2", "`run` with nothing to copy"),
    ("one_record_run", "`run` after one new record in every partition"),
    ("reference_write", "  reference: one producer, the copy's writer settings, writes that record"),
    ("reference_read", "  reference: one consumer reads that record from every partition"),
    ("describe", "`mirror describe` of one mirror"),
    *sensor_ticks.ROWS,
    ("config_sync_idle", "`link sync-configs` with nothing to change"),
    ("config_sync_changed", "`link sync-configs` after a config changed on every source topic"),
    ("metrics_show", "`metrics show`"),
    ("scrape", "a scrape of `metrics serve` ({scrape_kib:,} KiB), its second"),
    ("offset_sync", "`offsets sync` of {groups} consumer groups"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=100, help="source topics (default 100)")
    ap.add_argument("--partitions", type=int, default=10, help="partitions per topic (default 10)")
    ap.add_argument("--groups", type=int, default=1000, help="consumer groups to sync (default 1000; 0: none)")
    ap.add_argument("--initial-records", type=int, default=5, help="records per partition before the first run (5)")
    ap.add_argument("--base-port", type=int, default=BASE_PORT, help=f"cluster a's port; b is +10000 ({BASE_PORT})")
    ap.add_argument("--root", type=Path, default=BENCH_ROOT, help=f"the clusters' directory ({BENCH_ROOT})")
    ap.add_argument("--spark-master", default=None, help="spark.master (default: the engine's)")
    ap.add_argument(
        "--writer-slots", type=int, default=None, help="the link's mirror.writer.slots (default: the setting's, 16)"
    )
    ap.add_argument("--metrics-port", type=int, default=METRICS_PORT, help=f"`metrics serve`'s port ({METRICS_PORT})")
    ap.add_argument("--keep-clusters", action="store_true", help="leave the pair running at the end")
    ap.add_argument("--json-file", type=Path, metavar="PATH", help="also write the JSON document to PATH")
    args = ap.parse_args(argv)

    names = topic_names(args.topics) if args.topics <= 1000 else [f"scale-{i:05d}" for i in range(args.topics)]
    partitions = args.topics * args.partitions
    report: dict = {
        "params": {
            "topics": args.topics,
            "partitions": partitions,
            "initial_records": args.initial_records,
            "spark_master": args.spark_master or "engine default",
            "writer_slots": args.writer_slots or DEFAULT_WRITER_SLOTS,
        }
    }
    seconds: dict[str, float] = {}
    root = args.root.resolve()
    with local_clusters(root, args.keep_clusters, args.base_port) as lk:
        a, b = lk.bootstraps
        for boot in lk.bootstraps:
            warm_up(boot)
        t0 = time.perf_counter()
        create_topics(a, names, args.partitions)
        loader = Loader(a)
        targets = [(t, p) for t in names for p in range(args.partitions)]
        loader.write(targets, args.initial_records)
        say(
            f"setup: {args.topics} topics x {args.partitions} partitions, {args.initial_records} records each, "
            f"in {time.perf_counter() - t0:.0f} s"
        )
        config_path = write_config(root.parent / f"{root.name}.yaml", a, b, args.spark_master, args.writer_slots)
        run = ("run", "--link", LINK)
        seconds["first_run"] = command(config_path, *run)
        seconds["list"] = command(config_path, "mirror", "list", "--link", LINK)
        # A fresh pair's broker lists thousands of new topics over a minute or more: the runs after the first
        # copy the mirrors it did not list yet, until one has nothing to copy (timed on its own).
        next_runs = [command(config_path, *run)]
        while last_run_copied() and len(next_runs) < MAX_NEXT_RUNS:
            next_runs.append(command(config_path, *run))
        seconds["empty_run_1"] = round(sum(next_runs[:-1]), 2) if len(next_runs) > 1 else next_runs[0]
        report["next_runs"] = next_runs
        seconds["empty_run_2"] = next_runs[-1] if len(next_runs) > 1 else command(config_path, *run)
        if last_run_copied():
            raise SystemExit(f"still copying after {MAX_NEXT_RUNS} runs: no empty run to time")
        seconds["reference_write"] = reference_write(a, targets)  # the one new record, timed
        seconds["reference_read"] = reference_read(a, targets)
        say(
            f"reference: wrote one record to every partition in {seconds['reference_write']} s, read in "
            f"{seconds['reference_read']} s"
        )
        seconds["one_record_run"] = command(config_path, *run)
        seconds["describe"] = command(config_path, "mirror", "describe", names[0], "--link", LINK)
        matched, checked = mirrors_match(a, b, names, args.partitions)
        seconds.update(sensor_ticks.time_ticks(config_path, LINK))
        seconds["config_sync_idle"] = command(config_path, "link", "sync-configs", LINK)
        change_source_configs(a, names)
        seconds["config_sync_changed"] = command(config_path, "link", "sync-configs", LINK)
        seconds["metrics_show"] = command(config_path, "metrics", "show", "--link", LINK)
        timed = scrapes(config_path, args.metrics_port)
        say(f"metrics serve: scrapes of {timed[-1][1]:,} bytes in {', '.join(f'{t} s' for t, _ in timed)}")
        seconds["scrape"], report["scrape_bytes"] = timed[-1]
        if args.groups:
            group_topics = commit_groups(a, names, args.partitions, args.groups)
            say(f"setup: {args.groups} consumer groups committed")
            seconds["offset_sync"] = command(config_path, "offsets", "sync", "--link", LINK)
            report["groups_synced"] = dict(
                zip(("matched", "checked"), groups_synced(b, group_topics, args.partitions), strict=True)
            )
    report["seconds"] = seconds
    report["outputs"] = OUTPUTS
    report["mirrors_identical_log_ends"] = {"matched": matched, "checked": checked}
    if args.json_file:
        args.json_file.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"mirror-pipeline, one link of {args.topics:,} topics x {args.partitions} partitions ({partitions:,}), "
        f"CLI wall time, start-up included"
    )
    for key, label in ROWS:
        if key in seconds:
            scrape_kib = report.get("scrape_bytes", 0) // 1024
            row = label.format(initial=args.initial_records, groups=f"{args.groups:,}", scrape_kib=scrape_kib)
            print(f"{row:<72}{seconds[key]:>10.2f} s")
    print(f"mirrors whose log ends equal their source's: {matched:,} of {checked:,} partitions")
    synced = report.get("groups_synced", {"matched": 0, "checked": 0})
    if args.groups:
        print(f"groups whose destination offsets equal their source's: {synced['matched']:,} of {synced['checked']:,}")
    return 0 if matched == checked and synced["matched"] == synced["checked"] else 1


if __name__ == "__main__":
    sys.exit(main())
