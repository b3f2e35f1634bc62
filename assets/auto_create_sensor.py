"""The auto-create sensor of a link: new source topics become mirrors within one interval (R-AC-1).

It only reads. Every tick it runs the engine's auto-create scan as a dry run;
when the link's filters select source topics that have no mirror yet it
requests a run of the link's auto-create job, which creates them. It also
registers every mirror of the link that is not yet a dynamic partition, and
requests ONE replicate run giving the mirrors that appeared since the last
tick their first copy.

Cursor: JSON `{"mirrors": [...]}`, the link's mirrors at the last tick. An
ACTIVE mirror that is not in it gets its first copy requested; with no cursor
yet (a fresh sensor) none does: they were there before the sensor started.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
import json
import time

from dagster import RunRequest, SensorDefinition, SensorEvaluationContext, SensorResult, sensor

from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.states import ACTIVE
from mirror_pipeline.model.text import some_of
from mirror_pipeline_dagster.mirror_data import mirror_partitions
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.runs import request_for_mirrors, run_in_progress

AUTO_CREATE_SENSOR_INTERVAL_S = 30


def build_auto_create_sensor(names: LinkNames, replicate_job, auto_create_job) -> SensorDefinition:
    """`replicate_job` copies (first copies); `auto_create_job` creates the mirrors."""
    partitions_def = mirror_partitions(names)

    @sensor(
        name=names.auto_create_sensor,
        jobs=[replicate_job, auto_create_job],
        minimum_interval_seconds=AUTO_CREATE_SENSOR_INTERVAL_S,
        default_status=names.sensor_status,
        description=(
            f"With auto.create.mirror.topics.enable on, finds the source topics link '{names.link}''s "
            "filters select and requests a run that creates their mirrors; registers mirrors as "
            "partitions and requests their first copy."
        ),
    )
    def _auto_create_sensor(context: SensorEvaluationContext, mirror_engine: MirrorEngine):
        link = mirror_engine.link(names.link)
        if not link.auto_create_enable:
            return SensorResult(
                skip_reason=f"auto-create is off for link {link.name} (auto.create.mirror.topics.enable)",
                cursor=context.cursor,
            )
        try:
            plan = mirror_engine.auto_create_plan(names.link)
        except MirrorError as exc:
            # Kafka down (or a refused registry) is a state to report, not a daemon error: keep the cursor.
            return SensorResult(
                skip_reason=f"link {link.name} ({link.source} -> {link.destination}): {exc}",
                cursor=context.cursor,
            )

        registered = list(context.instance.get_dynamic_partitions(names.mirrors_partitions))
        new_keys = sorted(set(plan.mirrors) - set(registered))
        partition_requests = [partitions_def.build_add_request(new_keys)] if new_keys else []
        if new_keys:
            context.log.info(f"registering {len(new_keys)} mirror(s) of {link.name}: {some_of(new_keys)}")
        previous = _read_cursor(context.cursor)
        seen = set(previous["mirrors"]) if previous is not None else set(plan.mirrors)
        first_copy = sorted(m for m, state in plan.mirrors.items() if state == ACTIVE and m not in seen)
        # Unique per evaluation (a cursor reset must not replay old, deduplicated keys).
        stamp = time.time_ns() // 1_000_000
        requests = []
        if first_copy:
            context.log.info(f"link {link.name}: first copy of {some_of(first_copy)}")
            requests.append(
                request_for_mirrors(
                    first_copy,
                    registered + new_keys,
                    run_key=f"{link.name}:first-copy:{stamp}",
                    tags=names.run_tags,
                    job_name=replicate_job.name,
                )
            )
        summary = f"link {link.name}: {len(plan.mirrors)} mirror(s), {len(plan.to_create)} source topic(s) to mirror"
        running = run_in_progress(context.instance, auto_create_job.name)
        if plan.to_create and running:
            summary += f"; run {running} of {auto_create_job.name} is still in progress"
        elif plan.to_create:
            context.log.info(f"link {link.name}: to mirror: {some_of(plan.to_create)}")
            requests.append(
                RunRequest(
                    run_key=f"{link.name}:auto-create:{stamp}",
                    job_name=auto_create_job.name,
                    tags=names.housekeeping_tags,
                )
            )
        return SensorResult(
            run_requests=requests,
            skip_reason=None if requests else summary,
            dynamic_partitions_requests=partition_requests,
            cursor=json.dumps({"mirrors": sorted(plan.mirrors)}),
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
