"""Promote, failover and reverse as Dagster jobs (R-LC-3, R-LC-7, R-ORC-3).

One job each for all links: the link and mirrors come in the run config, so a
runbook, the CLI and the Dagster UI launch the very same job and leave the
same record in the run history.
"""

# No `from __future__ import annotations`: Dagster reads the op signatures' types.
from typing import Callable, List

from dagster import Config, Failure, JobDefinition, MetadataValue, OpExecutionContext, job, op
from dagster_pyspark import PySparkResource

from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.operations.lifecycle import LifecycleResult
from mirror_pipeline_dagster.resources.engine import MirrorEngine

PROMOTE_JOB = "promote"
FAILOVER_JOB = "failover"
REVERSE_JOB = "reverse"


class StopConfig(Config):
    """Which mirrors to stop; no topics means every mirror of the link."""

    link: str
    topics: List[str] = []
    timeout_s: float = 300.0


def _carry_out(context: OpExecutionContext, verb: Callable[[], LifecycleResult]) -> dict:
    """Run the engine verb; its refusal is the op's failure, in the engine's own sentence."""
    try:
        result = verb()
    except MirrorError as exc:
        raise Failure(description=str(exc)) from exc
    return _record(context, result)


def _record(context: OpExecutionContext, result: LifecycleResult) -> dict:
    data = result.to_dict()
    context.add_output_metadata(
        {
            "link": data["link"],
            "mirrors": MetadataValue.json(data["mirrors"]),
            "stopped": sum(1 for m in data["mirrors"].values() if m["after"] == "STOPPED"),
            "followed_back": sum(1 for m in data["mirrors"].values() if m.get("new_mirror")),
        }
    )
    for name, m in sorted(data["mirrors"].items()):
        if m.get("new_mirror"):
            context.log.info(f"{name}: followed by '{m['new_mirror']}' on link '{m['reverse_link']}' "
                             f"({m['after']}): {m['said']}")
        else:
            context.log.info(f"{name}: {m['before']} -> {m['after']}: {m['said']}")
    return data


@op(description="Finish copying, verify zero lag, then make the mirrors normal writable topics.")
def promote_mirrors(
    context: OpExecutionContext, config: StopConfig, mirror_engine: MirrorEngine, pyspark: PySparkResource
) -> dict:
    return _carry_out(context, lambda: mirror_engine.promote(config.link, pyspark.spark_session, config.topics,
                                                             config.timeout_s))


@op(description="Stop the mirrors at once, whatever the lag and whether the source answers.")
def failover_mirrors(context: OpExecutionContext, config: StopConfig, mirror_engine: MirrorEngine) -> dict:
    return _carry_out(context, lambda: mirror_engine.failover(config.link, config.topics))


@job(name=PROMOTE_JOB, description="Planned migration of mirrors: run config names the link and topics.")
def promote_job():
    promote_mirrors()


@job(name=FAILOVER_JOB, description="Disaster failover of mirrors: run config names the link and topics.")
def failover_job():
    failover_mirrors()


class ReverseConfig(Config):
    """Which stopped mirrors of `link` to reverse (named one by one: there is no "all"), and how."""

    link: str
    topics: List[str]
    reverse_link: str = ""  # empty: the one link the config declares the other way
    start: bool = True  # False: the new mirrors stay PAUSED (reverse-and-pause)
    dry_run: bool = False
    realign_groups: bool = False  # True: groups move back to their translation even when that is backwards


@op(description="Failback: the old sources of stopped mirrors become mirrors of them on the reverse link; "
                "records they would drop are saved to <topic>.diverged first.")
def reverse_mirrors(context: OpExecutionContext, config: ReverseConfig, mirror_engine: MirrorEngine) -> dict:
    if not config.topics:
        raise Failure(description="name the stopped mirrors to reverse in `topics` (there is no 'all' for reverse)")
    return _carry_out(context, lambda: mirror_engine.reverse(config.link, config.topics, config.reverse_link or None,
                                                             config.start, config.dry_run, config.realign_groups))


@job(name=REVERSE_JOB, description="Failback of stopped mirrors: run config names the link and topics.")
def reverse_job():
    reverse_mirrors()


def lifecycle_jobs() -> List[JobDefinition]:
    return [promote_job, failover_job, reverse_job]


def reverse_run_config(link: str, topics: List[str], reverse_link: str = "", start: bool = True,
                       dry_run: bool = False, realign_groups: bool = False) -> dict:
    config = {"link": link, "topics": list(topics), "reverse_link": reverse_link or "", "start": start,
              "dry_run": dry_run, "realign_groups": realign_groups}
    return {"ops": {"reverse_mirrors": {"config": config}}}


def stop_run_config(job_name: str, link: str, topics: List[str], timeout_s: float = 300.0) -> dict:
    op_name = "promote_mirrors" if job_name == PROMOTE_JOB else "failover_mirrors"
    config = {"link": link, "topics": list(topics)}
    if job_name == PROMOTE_JOB:
        config["timeout_s"] = timeout_s
    return {"ops": {op_name: {"config": config}}}
