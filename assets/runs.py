"""Run requests that cover many mirrors in one run, and the "already running" check.

A run of the copy asset covers a *range* of the link's dynamic partitions
(the asset's backfill policy is single-run). Dagster has no public way to
request a run for an arbitrary set of partition keys, so a request covers the
range from the first to the last wanted key in the partitions' order; mirrors
in between that have nothing to copy cost one cheap planning step.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from dagster import DagsterInstance, DagsterRunStatus, RunRequest, RunsFilter

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


def run_in_progress(instance: DagsterInstance, job_name: str) -> str | None:
    """The id of a queued or running run of `job_name`, if there is one."""
    runs = instance.get_runs(filters=RunsFilter(job_name=job_name, statuses=_IN_PROGRESS), limit=1)
    return runs[0].run_id if runs else None


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
) -> RunRequest:
    """ONE run request covering every mirror in `wanted`."""
    start, end = covering_range(wanted, ordered_keys)
    if start == end:
        return RunRequest(run_key=run_key, partition_key=start, tags=dict(tags))
    return RunRequest(
        run_key=run_key,
        tags={**tags, RANGE_START_TAG: start, RANGE_END_TAG: end},
    )
