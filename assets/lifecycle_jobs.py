"""Promote, failover and reverse as Dagster jobs (R-LC-3, R-LC-7, R-ORC-3).

One job each for all links: the link and mirrors come in the run config, so a
runbook, the CLI and the Dagster UI launch the very same job and leave the
same record in the run history. For the Launchpad, each link also has a
promote and a failover job of its own (`link_stop_jobs`) that name the link
once, in their name and tag: their form asks only for the mirrors.

Promote and failover are irreversible, so each runs in two steps. The first
(`check_promote`, `check_failover`: they hold the run config) refuses, before
anything changes, a request that names no topic (there is no "all" by
omission: the CLI's `--all` passes every name), a link the config file does
not declare, a run without the link's tag `mirror-pipeline/link: <link>` (the
tag queues the run behind the link's copies; the CLI sets it, a launch from
the UI must add it), or any topic that is not a mirror of the link or that
the verb cannot take now (its state or flags: all or nothing, as the engine's
`all_or_nothing` checks, naming each). Each refusal is one sentence, the
step's failure description. Only then does the second step
(`promote_mirrors`, `failover_mirrors`) call the engine. In runs launched
from the UI each step is a process of its own, so a refused promote never
starts Spark either. A verb that fails part-way fails its step saying which
mirrors changed and which did not; the result is attached to the failure
(metadata `PARTIAL_RESULT`) for the CLI to show.
"""

# No `from __future__ import annotations`: Dagster reads the op signatures' types.
import math
from collections.abc import Callable
from typing import NoReturn

from dagster import Config, Failure, JobDefinition, MetadataValue, OpExecutionContext, job, op
from dagster_pyspark import PySparkResource
from pydantic import Field

from mirror_pipeline import engine
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.text import some_of
from mirror_pipeline.operations.lifecycle import LifecycleResult
from mirror_pipeline_dagster.naming import LINK_TAG
from mirror_pipeline_dagster.resources.engine import MirrorEngine

PROMOTE_JOB = "promote"
FAILOVER_JOB = "failover"
REVERSE_JOB = "reverse"
# The check step of each stop job: it holds the run config.
CHECK_OPS = {PROMOTE_JOB: "check_promote", FAILOVER_JOB: "check_failover"}
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # what the CLI's --timeout allows
# The failure metadata holding what a verb that did not finish did (`LifecycleResult.to_dict()`).
PARTIAL_RESULT = "lifecycle_result"

_TOPICS_HELP = "The mirror topics of the link to stop, named one by one: at least one (there is no 'all' by omission)."


class FailoverConfig(Config):
    """Which mirrors of `link` to fail over, named one by one."""

    link: str = Field(description="The link, as named in the configuration file.")
    topics: list[str] = Field(description=_TOPICS_HELP)


class PromoteConfig(FailoverConfig):
    """Which mirrors of `link` to promote, named one by one, and how long to wait for zero lag."""

    timeout_s: float = Field(default=300.0, description="Seconds to wait for the lag to reach zero (1 to 604800).")


def checked_request(
    context: OpExecutionContext, verb: str, config: FailoverConfig, mirror_engine: MirrorEngine
) -> dict:
    """The request once it is safe to carry out; else the step fails with ONE sentence and nothing changed.

    Checked in this order, cheapest first: topics named, link declared, the
    run's tag, timeout, then (one Kafka read) every topic a mirror of the link
    that the verb can take now (`engine.check_lifecycle`).
    """
    topics = list(dict.fromkeys(config.topics))
    if not topics:
        _refuse(
            f"{verb} refused: name the mirror topics in `topics`; an empty list is not 'all' "
            "(the CLI's --all passes every mirror by name)"
        )
    loaded = _config_call(mirror_engine.load)
    if config.link not in loaded.links:
        _refuse(
            f"{verb} refused: no link {config.link!r} in {loaded.path or 'the configuration file'}; "
            f"its links: {', '.join(sorted(loaded.links)) or 'none'}"
        )
    tag = context.run.tags.get(LINK_TAG)
    if tag != config.link:
        has = f"it has '{LINK_TAG}: {tag}'" if tag else "it has none"
        _refuse(
            f"{verb} refused: the run must carry the tag '{LINK_TAG}: {config.link}' ({has}), so that it "
            "queues behind the link's other runs; the CLI sets it, in the launchpad add it under Tags"
        )
    timeout_s = getattr(config, "timeout_s", None)
    if timeout_s is not None and not (math.isfinite(timeout_s) and 1 <= timeout_s <= MAX_TIMEOUT_S):
        _refuse(f"{verb} refused: timeout_s must be between 1 and {MAX_TIMEOUT_S:.0f} seconds, not {timeout_s}")
    known = _config_call(lambda: mirror_engine.list_mirrors(config.link))
    _config_call(lambda: engine.check_lifecycle(loaded, config.link, verb, known, topics))
    context.log.info(f"{verb} of {len(topics)} mirror(s) of link {config.link}: {some_of(topics)}")
    request = {"link": config.link, "topics": topics}
    return {**request, "timeout_s": timeout_s} if timeout_s is not None else request


def _refuse(sentence: str) -> NoReturn:
    raise Failure(description=sentence, allow_retries=False)


def _config_call(read: Callable):
    """`read()`, whose refusal (a bad file, a cluster down) fails the step in the engine's own sentence."""
    try:
        return read()
    except MirrorError as exc:
        raise Failure(description=str(exc), allow_retries=False) from exc


def _carry_out(context: OpExecutionContext, verb: Callable[[], LifecycleResult]) -> dict:
    """Run the engine verb; its refusal is the op's failure, in the engine's own sentence."""
    try:
        result = verb()
    except engine.Incomplete as exc:
        # What changed stays changed (R-LC-8): logged and attached to the failure, for the CLI to show.
        _record(context, exc.result, as_output=False)
        raise Failure(
            description=str(exc), metadata={PARTIAL_RESULT: MetadataValue.json(exc.result.to_dict())}
        ) from exc
    except MirrorError as exc:
        raise Failure(description=str(exc)) from exc
    return _record(context, result)


def _record(context: OpExecutionContext, result: LifecycleResult, as_output: bool = True) -> dict:
    data = result.to_dict()
    if as_output:
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
            context.log.info(
                f"{name}: followed by '{m['new_mirror']}' on link '{m['reverse_link']}' ({m['after']}): {m['said']}"
            )
        else:
            context.log.info(f"{name}: {m['before']} -> {m['after']}: {m['said']}")
    for name, m in data.get("not_done", {}).items():
        context.log.warning(f"{name}: {m['state']}: not carried out: {m['why']}")
    return data


@op(
    description="Refuses, before anything changes, a promote that names no topic, an unknown link or mirror, "
    "a mirror it cannot take now, or lacks the link's run tag."
)
def check_promote(context: OpExecutionContext, config: PromoteConfig, mirror_engine: MirrorEngine) -> dict:
    return checked_request(context, PROMOTE_JOB, config, mirror_engine)


@op(
    description="Refuses, before anything changes, a failover that names no topic, an unknown link or mirror, "
    "a mirror it cannot take now, or lacks the link's run tag."
)
def check_failover(context: OpExecutionContext, config: FailoverConfig, mirror_engine: MirrorEngine) -> dict:
    return checked_request(context, FAILOVER_JOB, config, mirror_engine)


@op(description="Finish copying, verify zero lag, then make the mirrors normal writable topics.")
def promote_mirrors(
    context: OpExecutionContext, request: dict, mirror_engine: MirrorEngine, pyspark: PySparkResource
) -> dict:
    return carry_out_promote(context, request, mirror_engine, pyspark)


@op(description="Stop the mirrors at once, whatever the lag and whether the source answers.")
def failover_mirrors(context: OpExecutionContext, request: dict, mirror_engine: MirrorEngine) -> dict:
    return carry_out_failover(context, request, mirror_engine)


def carry_out_promote(
    context: OpExecutionContext, request: dict, mirror_engine: MirrorEngine, pyspark: PySparkResource
) -> dict:
    """The promote of a checked request (`checked_request`), as the second step of a promote job does it."""
    return _carry_out(
        context,
        lambda: mirror_engine.promote(request["link"], pyspark.spark_session, request["topics"], request["timeout_s"]),
    )


def carry_out_failover(context: OpExecutionContext, request: dict, mirror_engine: MirrorEngine) -> dict:
    """The failover of a checked request, as the second step of a failover job does it."""
    return _carry_out(context, lambda: mirror_engine.failover(request["link"], request["topics"]))


_TAGGED = f"The run must carry the tag '{LINK_TAG}: <link>' (the CLI sets it)."


@job(
    name=PROMOTE_JOB,
    description=f"Planned migration of mirrors: run config names the link and topics (at least one). {_TAGGED}",
)
def promote_job():
    promote_mirrors(check_promote())


@job(
    name=FAILOVER_JOB,
    description=f"Disaster failover of mirrors: run config names the link and topics (at least one). {_TAGGED}",
)
def failover_job():
    failover_mirrors(check_failover())


class ReverseConfig(Config):
    """Which stopped mirrors of `link` to reverse (named one by one: there is no "all"), and how."""

    link: str
    topics: list[str]
    reverse_link: str = ""  # empty: the one link the config declares the other way
    start: bool = True  # False: the new mirrors stay PAUSED (reverse-and-pause)
    dry_run: bool = False
    realign_groups: bool = False  # True: groups move back to their translation even when that is backwards


@op(
    description="Failback: the old sources of stopped mirrors become mirrors of them on the reverse link; "
    "records they would drop are saved to <topic>.diverged first."
)
def reverse_mirrors(context: OpExecutionContext, config: ReverseConfig, mirror_engine: MirrorEngine) -> dict:
    if not config.topics:
        raise Failure(description="name the stopped mirrors to reverse in `topics` (there is no 'all' for reverse)")
    return _carry_out(
        context,
        lambda: mirror_engine.reverse(
            config.link, config.topics, config.reverse_link or None, config.start, config.dry_run, config.realign_groups
        ),
    )


@job(name=REVERSE_JOB, description="Failback of stopped mirrors: run config names the link and topics.")
def reverse_job():
    reverse_mirrors()


def lifecycle_jobs() -> list[JobDefinition]:
    return [promote_job, failover_job, reverse_job]


def reverse_run_config(
    link: str,
    topics: list[str],
    reverse_link: str = "",
    start: bool = True,
    dry_run: bool = False,
    realign_groups: bool = False,
) -> dict:
    config = {
        "link": link,
        "topics": list(topics),
        "reverse_link": reverse_link or "",
        "start": start,
        "dry_run": dry_run,
        "realign_groups": realign_groups,
    }
    return {"ops": {"reverse_mirrors": {"config": config}}}


def stop_run_config(job_name: str, link: str, topics: list[str], timeout_s: float = 300.0) -> dict:
    """The run config of the promote or failover job: the link and the mirrors, by name (at least one)."""
    config: dict[str, object] = {"link": link, "topics": list(topics)}
    if job_name == PROMOTE_JOB:
        config["timeout_s"] = timeout_s
    return {"ops": {CHECK_OPS[job_name]: {"config": config}}}
