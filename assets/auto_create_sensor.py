"""The auto-create sensor of a link: new source topics become mirrors within one interval (R-AC-1).

Every tick it runs the engine's auto-create scan, which creates the mirrors
the link's filters call for; registers every mirror of the link that is not
yet a dynamic partition (created now, by the CLI, or by a tick that stopped
half-way); and requests ONE replicate run giving the mirrors that appeared
since the last tick their first copy.

Cursor: JSON `{"mirrors": [...]}`, the link's mirrors at the last tick. An
ACTIVE mirror that is not in it gets its first copy requested; with no cursor
yet (a fresh sensor) only the mirrors this tick created do.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
import json
import time

from dagster import DefaultSensorStatus, SensorDefinition, SensorEvaluationContext, SensorResult, SkipReason, sensor

from assets.mirror_data import mirror_partitions
from assets.naming import LinkNames
from assets.runs import request_for_mirrors
from mirror_pipeline.engine import auto_create
from mirror_pipeline.errors import MirrorError
from resources.mirror_config import MirrorConfigResource

AUTO_CREATE_SENSOR_INTERVAL_S = 30


def build_auto_create_sensor(names: LinkNames, job) -> SensorDefinition:
    """`job` is the link's replicate job (from `define_asset_job`)."""
    partitions_def = mirror_partitions(names)

    @sensor(
        name=names.auto_create_sensor,
        job=job,
        minimum_interval_seconds=AUTO_CREATE_SENSOR_INTERVAL_S,
        default_status=DefaultSensorStatus.STOPPED,
        description=(
            f"With auto.create.mirror.topics.enable on, creates mirrors for the source topics "
            f"link '{names.link}''s filters select, registers them as partitions and requests "
            "their first copy."
        ),
    )
    def _auto_create_sensor(context: SensorEvaluationContext, mirror_config: MirrorConfigResource):
        config = mirror_config.load()
        link = config.link(names.link)
        if not link.auto_create_enable:
            return SkipReason(f"auto-create is off for link {link.name} (auto.create.mirror.topics.enable)")
        try:
            result = auto_create(config, names.link)
        except MirrorError as exc:
            # Kafka down (or a refused registry) is a state to report, not a daemon error: keep the cursor.
            return SensorResult(
                skip_reason=f"link {link.name} ({link.source} -> {link.destination}): {exc}",
                cursor=context.cursor,
            )
        for source_topic, error in result.errors.items():
            context.log.warning(f"link {link.name}: creating a mirror of '{source_topic}' failed: {error}")

        registered = list(context.instance.get_dynamic_partitions(names.mirrors_partitions))
        new_keys = sorted(set(result.mirrors) - set(registered))
        partition_requests = [partitions_def.build_add_request(new_keys)] if new_keys else []
        previous = _read_cursor(context.cursor)
        seen = set(previous["mirrors"]) if previous is not None else set(result.mirrors)
        first_copy = sorted(
            m for m, state in result.mirrors.items()
            if state == "ACTIVE" and (m in result.created or m not in seen)
        )
        cursor = json.dumps({"mirrors": sorted(result.mirrors)})
        summary = (
            f"link {link.name}: {len(result.created)} mirror(s) created, {len(result.existing)} existing, "
            f"{len(result.skipped)} skipped, {len(result.errors)} failed"
        )
        if new_keys:
            context.log.info(f"registering {len(new_keys)} mirror(s) of {link.name}: {', '.join(new_keys)}")
        if not first_copy:
            return SensorResult(skip_reason=summary, dynamic_partitions_requests=partition_requests, cursor=cursor)
        context.log.info(f"{summary}; first copy of {', '.join(first_copy)}")
        # Unique per evaluation (a cursor reset must not replay old, deduplicated keys).
        run_key = f"{link.name}:auto-create:{time.time_ns() // 1_000_000}"
        return SensorResult(
            run_requests=[request_for_mirrors(first_copy, registered + new_keys, run_key=run_key, tags=names.run_tags)],
            dynamic_partitions_requests=partition_requests,
            cursor=cursor,
        )

    return _auto_create_sensor


def _read_cursor(cursor: str | None) -> dict | None:
    """The last tick's cursor, or None when there is none (or it is unreadable)."""
    if not cursor:
        return None
    try:
        value = json.loads(cursor)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("mirrors"), list):
        return None
    return value
