"""The replicate schedule of a link: every minute, one run over all its mirrors.

Stopped by default: on a fresh machine nothing copies until an operator turns
it on in the UI (or `dagster schedule start`), since a running schedule starts
a Spark session every minute. `dagster.automation.running: true` on the link
starts it (and the link's sensors) as soon as Dagster loads the link.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
from dagster import ScheduleDefinition, ScheduleEvaluationContext, schedule

from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.runs import one_run_over_mirrors

REPLICATE_CRON = "* * * * *"

# States in which a cycle copies nothing: no reason to widen the run for them.
IDLE_STATES = frozenset({"PAUSED", "STOPPED", "FAILED"})


def build_replicate_schedule(names: LinkNames, job) -> ScheduleDefinition:
    """`job` is the link's replicate job (from `define_asset_job`)."""

    @schedule(
        name=names.replicate_schedule,
        cron_schedule=REPLICATE_CRON,
        job=job,
        default_status=names.schedule_status,
        description=(
            f"Every minute, one replicate run of link '{names.link}' over all its mirrors. "
            "Mirrors not yet registered as partitions are picked up by the lag sensor."
        ),
    )
    def _replicate_schedule(context: ScheduleEvaluationContext, mirror_engine: MirrorEngine):
        return one_run_over_mirrors(
            context,
            mirror_engine,
            names,
            names.replicate_job,
            keep=lambda m: m.state not in IDLE_STATES,
            what="copy",
            run_key_prefix=names.link,
            tags=names.run_tags,
            skip_while=[names.follow_job],  # the always-on run copies already
        )

    return _replicate_schedule
