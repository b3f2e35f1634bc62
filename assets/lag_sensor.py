"""The lag sensor of a link: how Dagster learns of mirrors, and catches up when they lag.

Every tick it asks the engine for each mirror's lag (records not yet copied),
registers mirrors it has not seen as dynamic partitions (mirrors are created
in Kafka by the CLI or auto-create), and requests ONE replicate run over every
mirror whose lag is above the link's `mirror.lag.alert.records`, unless a run
of the replicate job is already queued or running.

Each tick also records, per registered mirror, an observation of the link's
copy asset with its lag and state and the link's mirror count per state, so
the UI plots lag between copies and shows the link's state at a glance.

Cursor: JSON `{"lags": {mirror: lag}, "last_run_key": ...}`, what it last saw.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
import json
import time

from dagster import (
    AddDynamicPartitionsRequest,
    AssetObservation,
    MetadataValue,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from mirror_pipeline.model.errors import ClusterUnreachable
from mirror_pipeline.model.states import count_per_state, state_summary
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.runs import request_for_mirrors, run_in_progress

LAG_SENSOR_INTERVAL_S = 30


def build_lag_sensor(names: LinkNames, job) -> SensorDefinition:
    """`job` is the link's replicate job (from `define_asset_job`)."""
    @sensor(
        name=names.lag_sensor,
        job=job,
        minimum_interval_seconds=LAG_SENSOR_INTERVAL_S,
        default_status=names.sensor_status,
        description=(
            f"Registers new mirrors of link '{names.link}' as partitions and requests one "
            "replicate run over the mirrors whose lag exceeds mirror.lag.alert.records."
        ),
    )
    def _lag_sensor(context: SensorEvaluationContext, mirror_engine: MirrorEngine):
        link = mirror_engine.link(names.link)
        previous = _read_cursor(context.cursor)
        try:
            infos, lags = mirror_engine.mirror_overview(names.link)
            states = {m.mirror_topic: m.state for m in infos}
        except ClusterUnreachable as exc:
            # Kafka down is an expected state, not a sensor error: skip, keep the cursor.
            return SensorResult(
                skip_reason=f"link {link.name} ({link.source} -> {link.destination}) "
                f"unreachable: {exc}",
                cursor=context.cursor,
            )

        registered = list(context.instance.get_dynamic_partitions(names.mirrors_partitions))
        known = set(registered)
        new = sorted(m for m in lags if m not in known)
        partition_requests = (
            [AddDynamicPartitionsRequest(partitions_def_name=names.mirrors_partitions, partition_keys=new)]
            if new
            else []
        )
        if new:
            context.log.info(f"registering {len(new)} new mirror(s) of {link.name}: {', '.join(new)}")
        behind = sorted(m for m, lag in lags.items() if lag > link.lag_alert_records)
        cursor = {"lags": dict(sorted(lags.items())), "last_run_key": previous.get("last_run_key")}
        summary = state_summary(count_per_state(states.values()))
        observed = observations(names, lags, states, known, summary)

        def skip(reason: str) -> SensorResult:
            return SensorResult(
                skip_reason=reason,
                dynamic_partitions_requests=partition_requests,
                asset_events=observed,
                cursor=json.dumps(cursor),
            )

        if not behind:
            return skip(
                f"{len(lags)} mirror(s) of {link.name} ({summary}), none more than "
                f"{link.lag_alert_records} records behind"
            )
        running = run_in_progress(context.instance, names.replicate_job)
        if running:
            return skip(
                f"{len(behind)} mirror(s) behind, but run {running} of "
                f"{names.replicate_job} is still in progress"
            )
        # Unique per evaluation (a cursor reset must not replay old, deduplicated keys).
        run_key = f"{link.name}:lag:{time.time_ns() // 1_000_000}"
        cursor["last_run_key"] = run_key
        context.log.info(
            f"{len(behind)} mirror(s) of {link.name} behind: "
            + ", ".join(f"{m} ({lags[m]})" for m in behind)
        )
        return SensorResult(
            run_requests=[
                request_for_mirrors(behind, registered + new, run_key=run_key, tags=names.run_tags)
            ],
            dynamic_partitions_requests=partition_requests,
            asset_events=observed,
            cursor=json.dumps(cursor),
        )

    return _lag_sensor


def observations(names: LinkNames, lags: dict[str, int], states: dict[str, str], registered: set,
                 summary: str) -> list[AssetObservation]:
    """Per registered mirror: its lag (plotted between copies) and state, and the link's summary."""
    return [
        AssetObservation(
            asset_key=names.mirror_data_key,
            partition=mirror,
            metadata={
                "replication-records-lag": MetadataValue.int(lag),
                "state": MetadataValue.text(states.get(mirror, "unknown")),
                "link_mirrors": MetadataValue.text(summary),
            },
        )
        for mirror, lag in sorted(lags.items())
        if mirror in registered
    ]


def _read_cursor(cursor: str | None) -> dict:
    if not cursor:
        return {}
    try:
        value = json.loads(cursor)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
