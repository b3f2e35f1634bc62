"""The lag sensor of a link: how Dagster learns of mirrors, and catches up when they lag.

Every tick it asks the engine for each mirror's lag (records not yet copied),
registers mirrors it has not seen as dynamic partitions (mirrors are created
in Kafka by the CLI or auto-create), and requests ONE replicate run over every
mirror whose lag is above the link's `mirror.lag.alert.records`.

At most one run waits: under the run queue (`deploy/dagster.yaml`, one run per
link at a time) a run is requested while another still copies, and the queue
starts it the moment that one ends, instead of a tick later (up to the
sensor's interval more of recovery point for every run). A run already queued
or starting is enough. Without the queue, runs would overlap, so the sensor
waits for the link's run to end. An always-on (follow) run copies already:
nothing is requested beside it.

A tick also records, per registered mirror, an observation of the link's copy
asset with its lag and state and the link's mirror count per state, so the UI
plots lag between copies and shows the link's state at a glance. Only news is
recorded: a mirror is observed when its state or the link's summary changed,
when its lag crossed zero or the alert threshold, or when its lag changed and
its last observation is `LAG_OBSERVATION_INTERVAL_S` old. Observing every
mirror on every tick would be 2,880 events a day per mirror, millions for a
large link, in the instance's event log.

Cursor: JSON `{"lags": {mirror: lag}, "last_run_key": ..., "observed": {mirror:
[lag, state, at]}, "summary": ...}`, what it last saw and last recorded.
"""

# No `from __future__ import annotations`: Dagster reads the decorated
# functions' annotations (context type, resource parameters) as real types.
import json
import time
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AssetObservation,
    MetadataValue,
    QueuedRunCoordinator,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from mirror_pipeline.model.errors import ClusterUnreachable
from mirror_pipeline.model.states import count_per_state, state_summary
from mirror_pipeline.model.text import some_of
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine
from mirror_pipeline_dagster.runs import request_for_mirrors, run_in_progress, run_waiting

LAG_OBSERVATION_INTERVAL_S = 300


def build_lag_sensor(names: LinkNames, job) -> SensorDefinition:
    """`job` is the link's replicate job (from `define_asset_job`)."""

    @sensor(
        name=names.lag_sensor,
        job=job,
        minimum_interval_seconds=names.lag_sensor_interval_s,
        default_status=names.sensor_status,
        description=(
            f"Registers new mirrors of link '{names.link}' as partitions and requests one "
            "replicate run over the mirrors whose lag exceeds mirror.lag.alert.records."
        ),
    )
    def _lag_sensor(context: SensorEvaluationContext, mirror_engine: MirrorEngine):
        link = mirror_engine.link(names.link)
        previous = _read_cursor(context.cursor)
        try:
            infos, lags = mirror_engine.mirror_overview(names.link)
            states = {m.mirror_topic: m.state for m in infos}
        except ClusterUnreachable as exc:
            # Kafka down is an expected state, not a sensor error: skip, keep the cursor.
            return SensorResult(
                skip_reason=f"link {link.name} ({link.source} -> {link.destination}) unreachable: {exc}",
                cursor=context.cursor,
            )

        registered = list(context.instance.get_dynamic_partitions(names.mirrors_partitions))
        known = set(registered)
        new = sorted(m for m in lags if m not in known)
        partition_requests = (
            [AddDynamicPartitionsRequest(partitions_def_name=names.mirrors_partitions, partition_keys=new)]
            if new
            else []
        )
        if new:
            context.log.info(f"registering {len(new)} new mirror(s) of {link.name}: {some_of(new)}")
        behind = sorted(m for m, lag in lags.items() if lag > link.lag_alert_records)
        summary = state_summary(count_per_state(states.values()))
        now = time.time()
        news = observation_news(lags, states, known, summary, previous, link.lag_alert_records, now)
        observed = observations(names, lags, states, news, summary)
        cursor = {
            "lags": dict(sorted(lags.items())),
            "last_run_key": previous.get("last_run_key"),
            "observed": _observed_after(previous, lags, states, news, now),
            "summary": summary,
        }

        def skip(reason: str) -> SensorResult:
            return SensorResult(
                skip_reason=reason,
                dynamic_partitions_requests=partition_requests,
                asset_events=observed,
                cursor=json.dumps(cursor),
            )

        if not behind:
            return skip(
                f"{len(lags)} mirror(s) of {link.name} ({summary}), none more than "
                f"{link.lag_alert_records} records behind"
            )
        ahead = _run_ahead(context.instance, names)
        if ahead:
            return skip(f"{len(behind)} mirror(s) behind, but {ahead}")
        # Unique per evaluation (a cursor reset must not replay old, deduplicated keys).
        run_key = f"{link.name}:lag:{time.time_ns() // 1_000_000}"
        cursor["last_run_key"] = run_key
        context.log.info(
            f"{len(behind)} mirror(s) of {link.name} behind, the most first: "
            + some_of([f"{m} ({lags[m]:,})" for m in sorted(behind, key=lambda m: -lags[m])])
        )
        return SensorResult(
            run_requests=[request_for_mirrors(behind, registered + new, run_key=run_key, tags=names.run_tags)],
            dynamic_partitions_requests=partition_requests,
            asset_events=observed,
            cursor=json.dumps(cursor),
        )

    return _lag_sensor


def observation_news(
    lags: dict[str, int],
    states: dict[str, str],
    registered: set,
    summary: str,
    previous: dict,
    alert_records: int,
    now: float,
) -> list[str]:
    """The registered mirrors worth an observation this tick (see the module's docstring)."""
    last = _last_observed(previous)
    summary_changed = previous.get("summary") != summary

    def band(lag: int) -> int:
        return 0 if lag <= 0 else 1 if lag <= alert_records else 2

    news = []
    for mirror, lag in sorted(lags.items()):
        if mirror not in registered:
            continue
        seen: Any = last.get(mirror)  # from the cursor's JSON: any shape; a wrong one is caught below
        try:
            seen_lag, seen_state, seen_at = int(seen[0]), str(seen[1]), float(seen[2])
        except (TypeError, ValueError, IndexError, KeyError):
            news.append(mirror)  # never observed, or a cursor from before observations were kept
            continue
        if (
            summary_changed
            or states.get(mirror, "unknown") != seen_state
            or band(lag) != band(seen_lag)
            or (lag != seen_lag and now - seen_at >= LAG_OBSERVATION_INTERVAL_S)
        ):
            news.append(mirror)
    return news


def _observed_after(previous: dict, lags: dict[str, int], states: dict[str, str], news: list[str], now: float) -> dict:
    """The cursor's last observation per mirror: this tick's news, the rest as before (gone mirrors dropped)."""
    kept = {m: v for m, v in _last_observed(previous).items() if m in lags}
    kept.update({m: [lags[m], states.get(m, "unknown"), round(now, 3)] for m in news})
    return dict(sorted(kept.items()))


def observations(
    names: LinkNames, lags: dict[str, int], states: dict[str, str], mirrors: list[str], summary: str
) -> list[AssetObservation]:
    """Per mirror of `mirrors`: its lag (plotted between copies) and state, and the link's summary."""
    return [
        AssetObservation(
            asset_key=names.mirror_data_key,
            partition=mirror,
            metadata={
                "replication-records-lag": MetadataValue.int(lags[mirror]),
                "state": MetadataValue.text(states.get(mirror, "unknown")),
                "link_mirrors": MetadataValue.text(summary),
            },
        )
        for mirror in mirrors
    ]


def _last_observed(previous: dict) -> dict:
    last = previous.get("observed")
    return last if isinstance(last, dict) else {}


def _read_cursor(cursor: str | None) -> dict:
    if not cursor:
        return {}
    try:
        value = json.loads(cursor)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _run_ahead(instance, names: LinkNames) -> str | None:
    """Why the sensor asks for no run now, as the end of a sentence; None: ask."""
    following = run_in_progress(instance, names.follow_job)
    if following:
        return f"always-on run {following} of {names.follow_job} copies them"
    if isinstance(instance.run_coordinator, QueuedRunCoordinator):
        waiting = run_waiting(instance, names.replicate_job)
        return f"run {waiting} of {names.replicate_job} is already waiting to start" if waiting else None
    running = run_in_progress(instance, names.replicate_job)
    return f"run {running} of {names.replicate_job} is still in progress" if running else None
