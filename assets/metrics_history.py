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
_FIRST_PAGE = 20
# How far before a window a read still looks for its records: a record may be stored after one stamped up to
# this much later than it (writers' clocks differ; an event is stamped before it is stored).
DISORDER_S = 120.0


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


def _materializations(instance: DagsterInstance, key: AssetKey, since: float) -> list:
    """The asset's materializations stamped after `since`, oldest first.

    Read newest first, a page at a time, until a page holds nothing stamped
    after `since - DISORDER_S`. Asked for the records after a time instead, the
    event log read every materialization of the asset ever recorded (none of
    its indexes has the timestamp): 0.8 s per asset, on each scrape, on an
    instance of 350,000 events, and growing with its history.
    """
    found = []
    cursor = None
    limit = _FIRST_PAGE  # reading a record is the cost: a window with none reads a few
    while True:
        page = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key), limit=limit, cursor=cursor, ascending=False
        )
        found += [r for r in page.records if r.timestamp > since]
        if not page.has_more or all(r.timestamp <= since - DISORDER_S for r in page.records):
            return found[::-1]
        cursor, limit = page.cursor, min(_PAGE, 2 * limit)


def _values(metadata: dict) -> dict:
    return {name: getattr(value, "value", value) for name, value in (metadata or {}).items()}
