"""The replicate schedule of a link: every minute, one run over all its mirrors.

Stopped by default: on a fresh machine nothing copies until an operator turns
it on in the UI (or `dagster schedule start`), since a running schedule starts
a Spark session every minute.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
from dagster import (
    DefaultScheduleStatus,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from assets.naming import LinkNames
from assets.runs import request_for_mirrors, run_in_progress
from mirror_pipeline.engine import list_mirrors
from mirror_pipeline.errors import ClusterUnreachable
from resources.mirror_config import MirrorConfigResource

REPLICATE_CRON = "* * * * *"

# States in which a cycle copies nothing: no reason to widen the run for them.
IDLE_STATES = frozenset({"PAUSED", "STOPPED", "FAILED"})


def build_replicate_schedule(names: LinkNames, job) -> ScheduleDefinition:
    """`job` is the link's replicate job (from `define_asset_job`)."""

    @schedule(
        name=names.replicate_schedule,
        cron_schedule=REPLICATE_CRON,
        job=job,
        default_status=DefaultScheduleStatus.STOPPED,
        description=(
            f"Every minute, one replicate run of link '{names.link}' over all its mirrors. "
            "Mirrors not yet registered as partitions are picked up by the lag sensor."
        ),
    )
    def _replicate_schedule(context: ScheduleEvaluationContext, mirror_config: MirrorConfigResource):
        running = run_in_progress(context.instance, names.replicate_job)
        if running:
            yield SkipReason(f"run {running} of {names.replicate_job} is still in progress")
            return
        config = mirror_config.load()
        try:
            mirrors = list_mirrors(config, names.link)
        except ClusterUnreachable as exc:
            yield SkipReason(f"link {names.link}: {exc}")
            return
        registered = list(context.instance.get_dynamic_partitions(names.mirrors_partitions))
        wanted = [m.mirror_topic for m in mirrors if m.state not in IDLE_STATES]
        unregistered = sorted(set(wanted) - set(registered))
        if unregistered:
            context.log.info(
                f"{len(unregistered)} mirror(s) not yet registered as partitions "
                f"(the lag sensor adds them): {', '.join(unregistered)}"
            )
        wanted = [m for m in wanted if m in set(registered)]
        if not wanted:
            yield SkipReason(f"link {names.link} has no registered mirror to copy")
            return
        scheduled = context.scheduled_execution_time
        yield request_for_mirrors(
            wanted,
            registered,
            run_key=f"{names.link}:{scheduled.isoformat() if scheduled else 'manual'}",
            tags=names.run_tags,
        )

    return _replicate_schedule
