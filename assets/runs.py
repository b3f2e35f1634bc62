"""Run requests that cover many mirrors in one run, and the "already running" check.

A run of the copy asset covers a *range* of the link's dynamic partitions
(the asset's backfill policy is single-run). Dagster has no public way to
request a run for an arbitrary set of partition keys, so a request covers the
range from the first to the last wanted key in the partitions' order; mirrors
in between that have nothing to copy cost one cheap planning step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    Failure,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SkipReason,
)

from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.text import some_of

# Dagster's own run tags for a single run over a partition range: the form the
# backfill daemon uses for single-run backfill policies.
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

# NOT_STARTED is left out on purpose: a run whose launch failed stays in it
# forever and would block the link; the tag concurrency limit still guards.
_IN_PROGRESS = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]
_WAITING = [DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING]


def run_in_progress(instance: DagsterInstance, job_name: str) -> str | None:
    """The id of a queued or running run of `job_name`, if there is one."""
    return _first_run(instance, job_name, _IN_PROGRESS)


def run_waiting(instance: DagsterInstance, job_name: str) -> str | None:
    """The id of a run of `job_name` that is queued or starting: one that has not begun its work yet."""
    return _first_run(instance, job_name, _WAITING)


def _first_run(instance: DagsterInstance, job_name: str, statuses: list[DagsterRunStatus]) -> str | None:
    runs = instance.get_runs(filters=RunsFilter(job_name=job_name, statuses=statuses), limit=1)
    return runs[0].run_id if runs else None


def any_run_in_progress(instance: DagsterInstance, job_names: Sequence[str]) -> tuple[str, str] | None:
    """(job name, run id) of a queued or running run of any of `job_names`, if there is one."""
    for job_name in job_names:
        running = run_in_progress(instance, job_name)
        if running:
            return job_name, running
    return None


def covering_range(wanted: Sequence[str], ordered_keys: Sequence[str]) -> tuple[str, str]:
    """First and last of `ordered_keys` (the partitions' order) that are in `wanted`."""
    wanted_set = set(wanted)
    positions = [i for i, key in enumerate(ordered_keys) if key in wanted_set]
    if not positions:
        raise ValueError("none of the wanted partition keys is registered")
    return ordered_keys[positions[0]], ordered_keys[positions[-1]]


def request_for_mirrors(
    wanted: Sequence[str],
    ordered_keys: Sequence[str],
    *,
    run_key: str,
    tags: Mapping[str, str],
    job_name: str | None = None,
) -> RunRequest:
    """ONE run request covering every mirror in `wanted` (`job_name`: for sensors that target several jobs)."""
    start, end = covering_range(wanted, ordered_keys)
    if start == end:
        return RunRequest(run_key=run_key, partition_key=start, tags=dict(tags), job_name=job_name)
    return RunRequest(
        run_key=run_key,
        tags={**tags, RANGE_START_TAG: start, RANGE_END_TAG: end},
        job_name=job_name,
    )


def one_run_over_mirrors(
    context: ScheduleEvaluationContext,
    mirror_engine,
    names,
    job_name: str,
    keep: Callable[[MirrorInfo], bool],
    what: str,
    run_key_prefix: str,
    tags: Mapping[str, str],
    skip_while: Sequence[str] = (),
) -> RunRequest | SkipReason:
    """What a link's schedules do: one run over the registered mirrors that `keep` selects.

    Skips while a run of the job (or of a job in `skip_while`) is still in
    progress, or when Kafka does not answer (naming the cluster, never failing
    the daemon).
    """
    running = any_run_in_progress(context.instance, [job_name, *skip_while])
    if running:
        return SkipReason(f"run {running[1]} of {running[0]} is still in progress")
    try:
        mirrors = mirror_engine.list_mirrors(names.link)
    except ClusterUnreachable as exc:
        return SkipReason(f"link {names.link}: {exc}")
    registered = list(context.instance.get_dynamic_partitions(names.mirrors_partitions))
    wanted = [m.mirror_topic for m in mirrors if keep(m)]
    unregistered = sorted(set(wanted) - set(registered))
    if unregistered:
        context.log.info(
            f"{len(unregistered)} mirror(s) not yet registered as partitions "
            f"(the lag sensor adds them): {some_of(unregistered)}"
        )
    wanted = [m for m in wanted if m in set(registered)]
    if not wanted:
        return SkipReason(f"link {names.link} has no registered mirror to {what}")
    # None when evaluated by hand (no tick), though Dagster's hints say datetime.
    scheduled: datetime | None = context.scheduled_execution_time
    return request_for_mirrors(
        wanted,
        registered,
        run_key=f"{run_key_prefix}:{scheduled.isoformat() if scheduled is not None else 'manual'}",
        tags=tags,
    )


def existing_mirrors(context, mirror_engine, names) -> list[str]:
    """The run's partition keys that are mirrors of the link (a deleted one is skipped, not an error)."""
    keys = list(context.partition_keys)
    try:
        known = {m.mirror_topic for m in mirror_engine.list_mirrors(names.link)}
    except MirrorError as exc:
        raise Failure(description=str(exc)) from exc
    gone = [k for k in keys if k not in known]
    if gone and len(gone) == len(keys):
        raise Failure(description=f"no mirror {some_of(gone)} on link '{names.link}'")
    if gone:
        context.log.warning(f"not mirrors of link {names.link} (deleted?), skipped: {some_of(gone)}")
    return [k for k in keys if k in known]
