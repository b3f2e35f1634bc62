#!/usr/bin/env python
"""What recording a wide link's cycle in Dagster costs, per storage: SQLite (the default) and PostgreSQL.

    .venv/bin/python benchmarks/dagster_record.py [--mirrors 1000] [--partitions 10] [--skip-postgres]

A cycle that copied into every mirror is recorded as `mirror-pipeline run`
records it (`dagster_recording.record_cycle`: one `mirror_data`
materialization per mirror, with its lineage and the cycle's totals, then the
copy asset's two checks), and an offset sync of one group per mirror as
`mirror-pipeline offsets sync` records it (one `consumer_offsets`
materialization per mirror, then the `offsets_in_sync` check), into a
fresh Dagster instance of each storage: `deploy/dagster.yaml` (SQLite under
the instance's directory) and `deploy/dagster-postgres.yaml` on a local
PostgreSQL server this script starts and stops (`mirror_pipeline.local.postgres`,
with PostgreSQL's default durability: fsync and synchronous commits on). The
reference, in the same invocation and instance: Dagster's own floor, the same
number of runless materializations without metadata. Each is recorded twice
(the first also makes the mirrors dynamic partitions). No Kafka: the results
are built in memory, with the figures a one-record cycle has, and so is the
link's overview the checks read (every mirror ACTIVE, no lag).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(REPO))

from dagster import AssetMaterialization  # noqa: E402

from benchmarks.common import say  # noqa: E402
from mirror_pipeline import engine  # noqa: E402
from mirror_pipeline.cli import dagster_events, dagster_recording  # noqa: E402
from mirror_pipeline.cli.dagster_runs import dagster_instance  # noqa: E402
from mirror_pipeline.config.loader import PipelineConfig, parse_config  # noqa: E402
from mirror_pipeline.local.postgres import local_postgres  # noqa: E402
from mirror_pipeline.model.offset_results import GroupOffsetSync, OffsetSyncResult, PartitionOffsetSync  # noqa: E402
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult, MirrorInfo, PartitionCopy  # noqa: E402
from mirror_pipeline_dagster.naming import LinkNames  # noqa: E402

LINK = "wide"
# Never reached: the checks' overview of the link is answered in memory (`in_memory_overview`).
CONFIG: PipelineConfig = parse_config(
    {
        "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:2"}},
        "links": {LINK: {"source": "src", "destination": "dst"}},
    },
    "dagster_record.py",
)


def one_record_cycle(mirrors: int, partitions: int) -> CycleResult:
    """A cycle that copied one record of 100 bytes into every partition of every mirror."""
    copies = {}
    for i in range(mirrors):
        topic = f"scale-{i:05d}"
        parts = tuple(
            PartitionCopy(
                p,
                5,
                6,
                5,
                6,
                records=1,
                bytes=100,
                lag_after=0,
                latency_min_ms=40,
                latency_max_ms=40,
                latency_sum_ms=40,
                latency_records=1,
            )
            for p in range(partitions)
        )
        copies[topic] = MirrorCopyResult(topic, topic, parts)
    return CycleResult(LINK, time.time(), 30.0, work_units=4, mirrors=copies)


def one_group_per_mirror(result: CycleResult) -> OffsetSyncResult:
    """An offset sync that committed one group per mirror on each of its partitions."""
    groups = [
        GroupOffsetSync(
            f"group-{m}",
            f"group-{m}",
            "synced",
            [PartitionOffsetSync(m, p.partition, 6, 6, 5, "committed", 6) for p in copy.partitions],
        )
        for m, copy in sorted(result.mirrors.items())
    ]
    return OffsetSyncResult(LINK, "exact", committed=sum(len(g.partitions) for g in groups), groups=groups)


def in_memory_overview(result: CycleResult):
    """`engine.mirror_overview` answered without Kafka: every mirror ACTIVE, no lag."""
    mirrors = [MirrorInfo(LINK, m, m, "ACTIVE", 0.0, "", 0.0) for m in sorted(result.mirrors)]
    return lambda config, link, measured_lags=None: (mirrors, {m.mirror_topic: 0 for m in mirrors})


def floor(result: CycleResult) -> None:
    """Dagster's own cost: one runless materialization per mirror, without metadata."""
    names = LinkNames(LINK)
    with dagster_instance() as instance:
        dagster_recording.register(instance, names, sorted(result.mirrors))
        for mirror in sorted(result.mirrors):
            instance.report_runless_asset_event(AssetMaterialization(asset_key=names.mirror_data_key, partition=mirror))


def cycle(result: CycleResult) -> None:
    overview = lambda: dagster_events.copy_checks_overview(CONFIG, LINK, result.measured_lags)  # noqa: E731
    dagster_recording.record_cycle(CONFIG, LINK, result, sorted(result.mirrors), f"run --link {LINK}", overview)


def offset_sync(result: CycleResult) -> None:
    synced = one_group_per_mirror(result)
    dagster_recording.record_offset_sync(CONFIG, LINK, synced, sorted(result.mirrors), f"offsets sync --link {LINK}")


def measure(storage: str, instance_file: Path, result: CycleResult, env: dict[str, str]) -> list[tuple]:
    rows = []
    for name, record in (
        ("Dagster's floor (no metadata)", floor),
        ("mirror-pipeline's cycle record", cycle),
        ("mirror-pipeline's offset sync", offset_sync),
    ):
        home = Path(tempfile.mkdtemp(prefix="dagster-record-"))
        try:
            shutil.copy(instance_file, home / "dagster.yaml")
            os.environ.update({**env, "DAGSTER_HOME": str(home)})
            for attempt in ("first", "second"):
                started = time.perf_counter()
                record(result)
                took = time.perf_counter() - started
                say(f"{storage}: {name}, {attempt}: {took:.2f} s")
                rows.append((storage, name, attempt, took))
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--skip-postgres", action="store_true")
    args = ap.parse_args()
    result = one_record_cycle(args.mirrors, args.partitions)
    engine.mirror_overview = in_memory_overview(result)  # the checks' one read of Kafka, answered in memory
    rows = measure("SQLite", REPO / "deploy" / "dagster.yaml", result, {})
    if not args.skip_postgres:
        with local_postgres(durable=True) as server:
            server.create_database("dagster")
            rows += measure(
                "PostgreSQL", REPO / "deploy" / "dagster-postgres.yaml", result, server.dagster_env("dagster")
            )
    print(f"\nrecording a cycle of {args.mirrors:,} mirrors x {args.partitions} partitions in Dagster\n")
    print(f"{'storage':<11} {'what':<32} {'record':<7} {'seconds':>8} {'ms per mirror':>14}")
    for storage, name, attempt, took in rows:
        print(f"{storage:<11} {name:<32} {attempt:<7} {took:>8.2f} {1000 * took / args.mirrors:>14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
