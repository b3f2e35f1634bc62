"""A link's recorded copies and offset syncs, read back from the Dagster instance for the metrics (R-OBS-1).

Every copy (a Dagster run, `mirror-pipeline run`, the demo) and every offset
sync leaves materializations with the figures the metrics need (built in
`mirror_metadata` and `offset_sync`), so the instance is the one history the
UI plots and the exporter summarises: both tell the same story.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagster import AssetKey, AssetRecordsFilter, DagsterInstance

from mirror_pipeline.model.metrics import CopySample
from mirror_pipeline_dagster.naming import LinkNames

_PAGE = 500


@dataclass(frozen=True)
class CheckpointSample:
    at: float
    latency_ms: float
    mirrors: tuple[str, ...]


def recorded_copies(instance: DagsterInstance, link: str, since: float) -> list[CopySample]:
    """Each mirror's part of each copy of `link` recorded after `since` (epoch seconds)."""
    out = []
    for record in _materializations(instance, LinkNames(link).mirror_data_key, since):
        event = record.asset_materialization
        values = _values(event.metadata)
        duration = float(values.get("cycle_duration_s", 0.0))
        started = float(values.get("cycle_started_at", record.timestamp - duration))
        out.append(
            CopySample(
                link=link,
                mirror=event.partition or "",
                at=started + duration,
                duration_s=duration,
                bytes=int(values.get("bytes", 0)),
                latency_count=int(values.get("latency_records", 0)),
                latency_min_ms=float(values.get("replication-latency-ms-min", 0.0)),
                latency_max_ms=float(values.get("replication-latency-ms-max", 0.0)),
                latency_sum_ms=float(values.get("replication-latency-ms-sum", 0)),
                cycle_id=f"{record.run_id}/{started}",
                cycle_bytes=int(values.get("cycle_bytes", 0)),
            )
        )
    return out


def recorded_checkpoints(instance: DagsterInstance, link: str, since: float) -> list[CheckpointSample]:
    """One sample per offset sync of `link` recorded after `since` that committed with a measured latency."""
    syncs: dict[tuple, list] = {}
    for record in _materializations(instance, LinkNames(link).consumer_offsets_key, since):
        event = record.asset_materialization
        values = _values(event.metadata)
        if "checkpoint-latency-ms" not in values:
            continue
        started = values.get("sync_started_at", record.timestamp)
        syncs.setdefault((record.run_id, started), []).append((record.timestamp, event.partition or "", values))
    return [
        CheckpointSample(
            max(t for t, _, _ in parts),
            float(parts[0][2]["checkpoint-latency-ms"]),
            tuple(sorted({m for _, m, _ in parts if m})),
        )
        for parts in syncs.values()
    ]


def _materializations(instance: DagsterInstance, key: AssetKey, since: float):
    cursor = None
    while True:
        page = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key, after_timestamp=since), limit=_PAGE, cursor=cursor, ascending=True
        )
        yield from page.records
        if not page.has_more:
            return
        cursor = page.cursor


def _values(metadata: dict) -> dict:
    return {name: getattr(value, "value", value) for name, value in (metadata or {}).items()}
