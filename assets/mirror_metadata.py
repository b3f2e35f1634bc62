"""The metadata of a `mirror_data` materialization: one mirror's lineage and its cycle's totals (R-OBS-4).

One place builds it, so a mirror copied by a Dagster run and one copied by
`mirror-pipeline run` (recorded runless, see `mirror_pipeline.cli.dagster_recording`)
show the same fields in the UI. Only figures and topic names: never a secret.
"""

from __future__ import annotations

from collections.abc import Callable

from dagster import MetadataValue

from mirror_pipeline.model.results import CycleResult, MirrorCopyResult


def materialization_metadata(result: CycleResult) -> Callable[[str], dict]:
    """Per mirror, everything its materialization records: the cycle's totals, then the mirror's own lineage.

    The totals are summed once: per mirror, they made recording 1,000 mirrors quadratic.
    """
    totals = cycle_metadata(result)
    return lambda mirror: {**totals, **mirror_metadata(result.mirrors.get(mirror))}


def mirror_metadata(copy: MirrorCopyResult | None) -> dict:
    """One mirror's lineage: per Kafka partition, source range read and mirror range written."""
    if copy is None:
        return {
            "records": MetadataValue.int(0),
            "bytes": MetadataValue.int(0),
            "note": MetadataValue.text(
                "nothing copied this cycle: the mirror is not active (paused, stopped, failed) or no longer exists"
            ),
        }
    return {
        "source_topic": MetadataValue.text(copy.source_topic),
        "records": MetadataValue.int(copy.records),
        "bytes": MetadataValue.int(copy.bytes),
        "lag_after": MetadataValue.int(copy.lag_after),
        "partitions_added": MetadataValue.int(copy.partitions_added),
        **left_to_next_epoch_metadata(copy),
        **held_metadata(copy),
        **latency_metadata(copy),
        "lineage": MetadataValue.md(lineage_table(copy)),
        "lineage_json": MetadataValue.json([p.to_dict() for p in copy.partitions]),
    }


def latency_metadata(copy: MirrorCopyResult) -> dict:
    """Replication latency of the records copied (R-OBS-1); floats and ints, so the UI plots them."""
    latency = copy.latency
    if not latency.count:
        return {}
    return {
        "replication-latency-ms-max": MetadataValue.int(latency.max_ms),
        "replication-latency-ms-avg": MetadataValue.float(round(latency.sum_ms / latency.count, 3)),
        "replication-latency-ms-min": MetadataValue.int(latency.min_ms),
        # Exact, so the metrics sum latencies over records without rounding (`metrics_history`).
        "replication-latency-ms-sum": MetadataValue.int(latency.sum_ms),
        "latency_records": MetadataValue.int(latency.count),
    }


def left_to_next_epoch_metadata(copy: MirrorCopyResult) -> dict:
    """Follow mode: the partitions this epoch did not copy because their task was ready too late."""
    left = sorted(p.partition for p in copy.partitions if p.left_to_next_epoch)
    if not left:
        return {}
    return {
        "partitions_left_to_next_epoch": MetadataValue.int(len(left)),
        "note": MetadataValue.text(
            f"partition(s) {', '.join(map(str, left))} left to the next epoch: their task was ready too late to "
            "take over this one, or was still waiting out records in doubt, so the next epoch copies them from "
            "where the mirror ends"
        ),
    }


def held_metadata(copy: MirrorCopyResult) -> dict:
    """Follow mode: rounds not acknowledged in time, after which their partitions were held until none of
    those records could land, then copied on (`left_open`)."""
    held = sum(p.rounds_held for p in copy.partitions)
    return {"rounds_not_acknowledged_in_time": MetadataValue.int(held)} if held else {}


def lineage_table(copy: MirrorCopyResult) -> str:
    rows = [
        "| partition | source offsets read | mirror offsets written | records | bytes | lag after | max latency ms |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for p in sorted(copy.partitions, key=lambda p: p.partition):
        latency = p.latency_max_ms if p.latency_records else "–"
        read = "left to the next epoch" if p.left_to_next_epoch else f"[{p.source_from}, {p.source_until})"
        rows.append(
            f"| {p.partition} | {read} | [{p.dest_from}, {p.dest_until}) "
            f"| {p.records} | {p.bytes} | {p.lag_after} | {latency} |"
        )
    if not copy.partitions:
        rows.append("| – | nothing to copy | – | 0 | 0 | 0 | – |")
    return "\n".join(rows)


def cycle_metadata(result: CycleResult) -> dict:
    """Totals of the whole cycle; recorded on every mirror's materialization of the run."""
    return {
        "cycle_records": MetadataValue.int(result.records),
        "cycle_bytes": MetadataValue.int(result.bytes),
        "cycle_lag_after": MetadataValue.int(result.lag_after),
        "cycle_duration_s": MetadataValue.float(round(result.duration_s, 3)),
        # The cycle's bytes over its duration: the link's byte-rate sample (R-OBS-1).
        "byte-rate": MetadataValue.float(round(result.bytes / result.duration_s, 1) if result.duration_s > 0 else 0.0),
        "cycle_mirrors": MetadataValue.int(len(result.mirrors)),
        "cycle_work_units": MetadataValue.int(result.work_units),
        **(
            {"cycle_partitions_left_to_next_epoch": MetadataValue.int(result.left_to_next_epoch)}
            if result.left_to_next_epoch
            else {}
        ),
        "cycle_started_at": MetadataValue.timestamp(result.started_at),
    }
