"""Per link, a sensor that watches the source and moves mirror states (R-LC-5).

It copies nothing and requests no run: it probes the source cluster and each
source topic, so that SOURCE_UNAVAILABLE, the way back to ACTIVE and FAILED
(after `cluster.link.retry.timeout.ms`) happen even when no cycle runs.
"""

# No `from __future__ import annotations`: Dagster reads the sensor signature's types.
from collections import Counter

from dagster import DefaultSensorStatus, SensorDefinition, SensorEvaluationContext, SkipReason, sensor

from assets.naming import LinkNames
from mirror_pipeline import engine
from mirror_pipeline.errors import MirrorError
from resources.mirror_config import MirrorConfigResource

HEALTH_SENSOR_INTERVAL_S = 30


def build_health_sensor(names: LinkNames) -> SensorDefinition:
    @sensor(
        name=f"{names.group}_health_sensor",
        minimum_interval_seconds=HEALTH_SENSOR_INTERVAL_S,
        default_status=DefaultSensorStatus.STOPPED,
        description=(
            f"Probes link '{names.link}''s source: marks mirrors SOURCE_UNAVAILABLE, ACTIVE again, "
            "or FAILED after cluster.link.retry.timeout.ms."
        ),
    )
    def _health_sensor(context: SensorEvaluationContext, mirror_config: MirrorConfigResource):
        try:
            states = engine.check_health(mirror_config.load(), names.link)
        except MirrorError as exc:
            return SkipReason(f"link {names.link}: {exc}")
        counts = Counter(states.values())
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no mirrors"
        context.log.info(f"link {names.link}: {summary}")
        return SkipReason(f"link {names.link}: {summary}")

    return _health_sensor
