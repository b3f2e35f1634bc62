"""Per link, a sensor that watches the source and requests the runs that move mirror states (R-LC-5).

It only reads: it probes the source cluster and each source topic and asks
the engine what that changes (SOURCE_UNAVAILABLE, the way back to ACTIVE,
FAILED after `cluster.link.retry.timeout.ms`). When something would change
it requests a run of the link's health job, which applies it, so these
moves happen even when no cycle runs.
"""

# No `from __future__ import annotations`: Dagster reads the sensor signature's types.
import time

from dagster import RunRequest, SensorDefinition, SensorEvaluationContext, SkipReason, sensor

from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.runs import run_in_progress

HEALTH_SENSOR_INTERVAL_S = 30


def build_health_sensor(names: LinkNames, health_job) -> SensorDefinition:
    @sensor(
        name=names.health_sensor,
        job=health_job,
        minimum_interval_seconds=HEALTH_SENSOR_INTERVAL_S,
        default_status=names.sensor_status,
        description=(
            f"Probes link '{names.link}''s source; requests a run that marks mirrors SOURCE_UNAVAILABLE, "
            "ACTIVE again, or FAILED after cluster.link.retry.timeout.ms."
        ),
    )
    def _health_sensor(context: SensorEvaluationContext, mirror_engine: MirrorEngine):
        try:
            changes = mirror_engine.health_changes(names.link)
        except MirrorError as exc:
            return SkipReason(f"link {names.link}: {exc}")
        if not changes:
            return SkipReason(f"link {names.link}: no mirror changes state")
        said = "; ".join(f"{m}: {c['before']} -> {c['after']} ({c['reason']})" for m, c in sorted(changes.items()))
        running = run_in_progress(context.instance, health_job.name)
        if running:
            return SkipReason(f"link {names.link}: {said}; run {running} of {health_job.name} is still in progress")
        context.log.info(f"link {names.link}: {said}")
        # Unique per evaluation: the same change may be due again after a recovery.
        return RunRequest(run_key=f"{names.link}:health:{time.time_ns() // 1_000_000}", tags=names.housekeeping_tags)

    return _health_sensor
