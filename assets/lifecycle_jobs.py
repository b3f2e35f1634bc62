"""Promote and failover as Dagster jobs (R-LC-3, R-ORC-3).

One job each for all links: the link and mirrors come in the run config, so a
runbook, the CLI and the Dagster UI launch the very same job and leave the
same record in the run history.
"""

# No `from __future__ import annotations`: Dagster reads the op signatures' types.
from typing import List

from dagster import Config, Failure, JobDefinition, MetadataValue, OpExecutionContext, job, op
from dagster_pyspark import PySparkResource

from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.operations.lifecycle import LifecycleResult
from mirror_pipeline_dagster.resources.engine import MirrorEngine

PROMOTE_JOB = "promote"
FAILOVER_JOB = "failover"


class StopConfig(Config):
    """Which mirrors to stop; no topics means every mirror of the link."""

    link: str
    topics: List[str] = []
    timeout_s: float = 300.0


def _record(context: OpExecutionContext, result: LifecycleResult) -> dict:
    data = result.to_dict()
    context.add_output_metadata(
        {
            "link": data["link"],
            "mirrors": MetadataValue.json(data["mirrors"]),
            "stopped": sum(1 for m in data["mirrors"].values() if m["after"] == "STOPPED"),
        }
    )
    for name, m in sorted(data["mirrors"].items()):
        context.log.info(f"{name}: {m['before']} -> {m['after']}: {m['said']}")
    return data


@op(description="Finish copying, verify zero lag, then make the mirrors normal writable topics.")
def promote_mirrors(
    context: OpExecutionContext, config: StopConfig, mirror_engine: MirrorEngine, pyspark: PySparkResource
) -> dict:
    try:
        result = mirror_engine.promote(config.link, pyspark.spark_session, config.topics, config.timeout_s)
    except MirrorError as exc:
        raise Failure(description=str(exc)) from exc
    return _record(context, result)


@op(description="Stop the mirrors at once, whatever the lag and whether the source answers.")
def failover_mirrors(context: OpExecutionContext, config: StopConfig, mirror_engine: MirrorEngine) -> dict:
    try:
        result = mirror_engine.failover(config.link, config.topics)
    except MirrorError as exc:
        raise Failure(description=str(exc)) from exc
    return _record(context, result)


@job(name=PROMOTE_JOB, description="Planned migration of mirrors: run config names the link and topics.")
def promote_job():
    promote_mirrors()


@job(name=FAILOVER_JOB, description="Disaster failover of mirrors: run config names the link and topics.")
def failover_job():
    failover_mirrors()


def lifecycle_jobs() -> List[JobDefinition]:
    return [promote_job, failover_job]


def stop_run_config(job_name: str, link: str, topics: List[str], timeout_s: float = 300.0) -> dict:
    op_name = "promote_mirrors" if job_name == PROMOTE_JOB else "failover_mirrors"
    config = {"link": link, "topics": list(topics)}
    if job_name == PROMOTE_JOB:
        config["timeout_s"] = timeout_s
    return {"ops": {op_name: {"config": config}}}
