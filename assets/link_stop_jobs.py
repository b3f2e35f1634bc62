"""Per link, a promote and a failover job whose Launchpad form asks only for the mirrors.

The jobs for all links (`lifecycle_jobs`) take the link in the run config and
refuse to run without the link's run tag, so an operator launching one from
the Launchpad names the link twice and, until both are typed, sees Launch
greyed out. At 3 a.m. that is one form too many. These jobs carry the link in
their name and their tag (`mirror-pipeline/link: <link>`, which queues the
run behind the link's copies); their config is the mirrors and, for promote,
the timeout. The steps are the same as the shared jobs' (`checked_request`,
then the engine verb), so the checks, refusals and records are the same.

They are partitioned by the link's mirrors (the partitions of its assets), so
the Launchpad offers the mirror to pick from a list: a run acts on the mirror
picked there plus any named in `topics`. Several mirrors at once are named in
`topics`; a backfill over picked partitions runs one run per mirror, each
queued behind the link's other runs.
"""

# No `from __future__ import annotations`: Dagster reads the op signatures' types.

from dagster import Config, JobDefinition, OpExecutionContext, job, op
from dagster_pyspark import PySparkResource
from pydantic import Field

from mirror_pipeline_dagster.lifecycle_jobs import (
    FAILOVER_JOB,
    PROMOTE_JOB,
    FailoverConfig,
    PromoteConfig,
    carry_out_failover,
    carry_out_promote,
    checked_request,
)
from mirror_pipeline_dagster.mirror_data import mirror_partitions
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine

_TOPICS_HELP = (
    "besides the mirror picked as the run's partition, named one by one; with no partition picked, "
    "at least one (`mirror-pipeline mirror list --link <link>` lists them)."
)


class LinkFailoverConfig(Config):
    topics: list[str] = Field(default_factory=list, description="The link's mirror topics to fail over " + _TOPICS_HELP)


class LinkPromoteConfig(Config):
    topics: list[str] = Field(default_factory=list, description="The link's mirror topics to promote " + _TOPICS_HELP)
    timeout_s: float = Field(default=300.0, description="Seconds to wait for the lag to reach zero (1 to 604800).")


def build_link_stop_jobs(names: LinkNames) -> list[JobDefinition]:
    link = names.link

    @op(
        name=f"{names.group}_check_promote",
        description=f"Refuses, before anything changes, a promote of link '{link}' that names no topic or a "
        "mirror it cannot take now.",
    )
    def check_promote(context: OpExecutionContext, config: LinkPromoteConfig, mirror_engine: MirrorEngine) -> dict:
        request = PromoteConfig(link=link, topics=_picked(context, config.topics), timeout_s=config.timeout_s)
        return checked_request(context, PROMOTE_JOB, request, mirror_engine)

    @op(
        name=f"{names.group}_promote_mirrors",
        description="Finish copying, verify zero lag, then make the mirrors normal writable topics.",
    )
    def promote_mirrors(
        context: OpExecutionContext, request: dict, mirror_engine: MirrorEngine, pyspark: PySparkResource
    ) -> dict:
        return carry_out_promote(context, request, mirror_engine, pyspark)

    @op(
        name=f"{names.group}_check_failover",
        description=f"Refuses, before anything changes, a failover of link '{link}' that names no topic or a "
        "mirror it cannot take now.",
    )
    def check_failover(context: OpExecutionContext, config: LinkFailoverConfig, mirror_engine: MirrorEngine) -> dict:
        return checked_request(
            context, FAILOVER_JOB, FailoverConfig(link=link, topics=_picked(context, config.topics)), mirror_engine
        )

    @op(
        name=f"{names.group}_failover_mirrors",
        description="Stop the mirrors at once, whatever the lag and whether the source answers.",
    )
    def failover_mirrors(context: OpExecutionContext, request: dict, mirror_engine: MirrorEngine) -> dict:
        return carry_out_failover(context, request, mirror_engine)

    @job(
        name=names.promote_job,
        tags=names.lifecycle_tags,
        partitions_def=mirror_partitions(names),
        description=f"Planned migration of mirrors of link '{link}': pick the mirror as the partition, or name "
        "mirrors in the config.",
    )
    def promote_job():
        promote_mirrors(check_promote())

    @job(
        name=names.failover_job,
        tags=names.lifecycle_tags,
        partitions_def=mirror_partitions(names),
        description=f"Disaster failover of mirrors of link '{link}': pick the mirror as the partition, or name "
        "mirrors in the config.",
    )
    def failover_job():
        failover_mirrors(check_failover())

    return [promote_job, failover_job]


def _picked(context: OpExecutionContext, topics: list[str]) -> list[str]:
    """The mirror picked as the run's partition (if any), then those named in the config."""
    picked = [context.partition_key] if context.has_partition_key else []
    return list(dict.fromkeys(picked + list(topics)))


def link_stop_run_config(names: LinkNames, verb: str, topics: list[str], timeout_s: float = 300.0) -> dict:
    """The run config of the link's own promote or failover job."""
    config: dict = {"topics": list(topics)}
    if verb == PROMOTE_JOB:
        config["timeout_s"] = timeout_s
    return {"ops": {f"{names.group}_check_{verb}": {"config": config}}}
