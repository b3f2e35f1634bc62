"""Per link, the runs its sensors request: the health probe and the auto-create scan.

Sensors only read and decide; the state changes and topic creations they
call for happen here, in runs, where the run history records them.
"""

# No `from __future__ import annotations`: Dagster reads the op signatures' types.
from collections.abc import Callable

from dagster import Failure, JobDefinition, MetadataValue, OpExecutionContext, job, op

from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine


def build_health_job(names: LinkNames) -> JobDefinition:
    def check_health(context: OpExecutionContext, mirror_engine: MirrorEngine) -> dict:
        states = mirror_engine.check_health(names.link)
        context.add_output_metadata({"states": MetadataValue.json(states)})
        return states

    return _one_step_job(
        names,
        names.health_job,
        "check_health",
        check_health,
        op_description=f"Probe link '{names.link}''s source and move its mirrors' states (R-LC-5).",
        job_description=f"Apply what link '{names.link}''s health sensor found.",
    )


def build_auto_create_job(names: LinkNames) -> JobDefinition:
    def auto_create_mirrors(context: OpExecutionContext, mirror_engine: MirrorEngine) -> dict:
        result = mirror_engine.auto_create(names.link)
        for source_topic, error in result.errors.items():
            context.log.warning(f"link {names.link}: creating a mirror of '{source_topic}' failed: {error}")
        # Registered at once, so the sensor's next tick can request their first copy.
        registered = set(context.instance.get_dynamic_partitions(names.mirrors_partitions))
        new_keys = sorted(set(result.mirrors) - registered)
        if new_keys:
            context.instance.add_dynamic_partitions(names.mirrors_partitions, new_keys)
        context.add_output_metadata(
            {"created": MetadataValue.json(result.created), "failed": MetadataValue.json(result.errors)}
        )
        return result.to_dict()

    return _one_step_job(
        names,
        names.auto_create_job,
        "auto_create_mirrors",
        auto_create_mirrors,
        op_description=f"Create mirrors of the source topics link '{names.link}''s auto-create filters select.",
        job_description=f"Create the mirrors link '{names.link}''s auto-create sensor found missing.",
    )


def _one_step_job(
    names: LinkNames, job_name: str, step: str, body: Callable, *, op_description: str, job_description: str
) -> JobDefinition:
    """A job of one op running `body(context, mirror_engine)`; engine errors fail it with their message."""

    @op(name=f"{names.group}_{step}", description=op_description)
    def the_op(context: OpExecutionContext, mirror_engine: MirrorEngine) -> dict:
        try:
            return body(context, mirror_engine)
        except MirrorError as exc:
            raise Failure(description=str(exc)) from exc

    @job(name=job_name, tags=names.housekeeping_tags, description=job_description)
    def the_job():
        the_op()

    return the_job
