"""`mirror-pipeline run`: one replication cycle of a link, without the Dagster daemon.

The mirrors it copied are recorded in the Dagster instance the UI reads, as
materializations of the link's `mirror_data` asset (see `dagster_events`).
"""

from __future__ import annotations

import json
import sys

import click

import mirror_pipeline.cli.dagster_events as dagster_events
import mirror_pipeline.cli.follow as following
from mirror_pipeline import engine
from mirror_pipeline.cli.common import (
    config_option,
    emit,
    fail,
    handle_errors,
    json_option,
    link_option,
    load,
    refuse_unknown_mirrors,
    table,
)
from mirror_pipeline.cli.values import TOPIC, printable
from mirror_pipeline.model.results import over_budget_note
from mirror_pipeline.model.text import some_of
from mirror_pipeline.operations.follow import DEFAULT_EPOCH_S
from mirror_pipeline.replication.spark_runner import LazySession, spark_session


@click.command()
@link_option
@click.option(
    "--mirror", "mirrors", type=TOPIC, multiple=True, help="Only this mirror topic (repeatable) [default: all]."
)
@click.option(
    "--follow",
    is_flag=True,
    help="Keep copying as records arrive (always-on), epoch after epoch, until Ctrl-C or SIGTERM.",
)
@click.option(
    "--epoch-seconds",
    type=click.FloatRange(1, 3600),
    default=DEFAULT_EPOCH_S,
    show_default=True,
    help="With --follow: how long each epoch's tasks copy before the epoch is recorded and replanned.",
)
@config_option
@json_option
@handle_errors
def run(
    link: str, mirrors: tuple[str, ...], follow: bool, epoch_seconds: float, config_path: str | None, as_json: bool
) -> None:
    """Run one replication cycle of a link: plan, copy in one Spark job, record.

    With auto.create.mirror.topics.enable on, the source topics the filters
    select get their mirrors first, and the cycle copies them too.

    On a terminal, a long copy shows records copied of records to copy.

    With --follow (always-on mode) one Spark application keeps copying: each
    epoch's tasks copy records as they arrive, and every epoch is recorded as
    a cycle is. Topic configs and consumer offsets are synced beside it on the
    link's intervals. Ctrl-C or SIGTERM stops after the epoch in flight.

    Example: mirror-pipeline run --link west-to-east
    Example: mirror-pipeline run --link west-to-east --follow
    """
    config = load(config_path, link)  # an unknown link fails before Spark starts
    auto_create = config.link(link).auto_create_enable
    mirrors = tuple(dict.fromkeys(mirrors))
    if mirrors:  # unknown names fail before auto-create or Spark
        refuse_unknown_mirrors(mirrors, _mirror_names(config, link, mirrors, auto_create), link, "--mirror", as_json)
    # New source topics become mirrors first, so a cycle run without the daemon picks them up (R-AC-1).
    created = engine.auto_create(config, link) if auto_create else None
    if follow:
        if created is not None:  # one line of JSON, like each epoch's
            click.echo(
                json.dumps({"auto_create": created.to_dict()}, sort_keys=True, default=str)
                if as_json
                else printable(_render_auto_create(created.to_dict()))
            )
        following.follow(
            config, link, spark_session(config.spark), mirrors, epoch_seconds, as_json, scanned=created is not None
        )
        return
    progress = _terminal_progress() if sys.stderr.isatty() and not as_json else None
    # A session starts only when there is something to copy, and a record in Dagster follows the copy:
    # Dagster's import and the instance's opening (a second of CPU) take the core the JVM's start leaves.
    spark = LazySession(config.spark, while_starting=dagster_events.prepare_in_background)
    try:
        result = engine.run_cycle(config, link, spark, mirrors=list(mirrors) or None, progress=progress)
    except engine.CycleFailed as exc:
        emit(_with_auto_create({**exc.result.to_dict(), "errors": exc.errors}, created), as_json, _render_run)
        # The mirrors that did copy are recorded all the same, as a Dagster run records them.
        dagster_events.record_cycle(config, link, exc.result, mirrors, origin=f"run --link {link}", as_json=as_json)
        fail(str(exc), as_json)
    finally:
        if progress:
            click.echo("", err=True)
    emit(_with_auto_create(result.to_dict(), created), as_json, _render_run)
    dagster_events.record_cycle(config, link, result, mirrors, origin=f"run --link {link}", as_json=as_json)
    if created is not None and created.errors:
        fail("auto-create failed for " + "; ".join(f"'{t}': {e}" for t, e in created.errors.items()), as_json)


def _mirror_names(config, link: str, wanted: tuple[str, ...], auto_create: bool) -> set[str]:
    """The link's mirror topics, and those auto-create is about to make when `wanted` needs them."""
    names = {m.mirror_topic for m in engine.list_mirrors(config, link)}
    if auto_create and not set(wanted) <= names:
        names |= {o["mirror_topic"] for o in engine.auto_create(config, link, dry_run=True).to_dict()["to_create"]}
    return names


def _with_auto_create(cycle: dict, created) -> dict:
    return {**cycle, "auto_create": created.to_dict()} if created is not None else cycle


def _render_run(d: dict) -> str:
    cycle = _render_cycle(d)
    if "auto_create" not in d:
        return cycle
    return _render_auto_create(d["auto_create"]) + "\n\n" + cycle


def _render_auto_create(a: dict) -> str:
    lines = [
        f"auto-create: {len(a['created'])} mirror(s) created, {len(a['existing'])} existing, "
        f"{len(a['skipped'])} skipped, {len(a['failed'])} failed"
    ]
    lines += [f"  created {o['mirror_topic']} (from {o['source_topic']})" for o in a["created"]]
    lines += [f"  skipped {o['source_topic']}: {o['reason']}" for o in a["skipped"]]
    lines += [f"  failed {o['source_topic']}: {o['reason']}" for o in a["failed"]]
    return "\n".join(lines)


def _terminal_progress():
    def show(done: int, total: int) -> None:
        pct = 100 * done / total if total else 100
        click.echo(f"\rcopied {done:,} of {total:,} records ({pct:.0f}%)", err=True, nl=False)

    return show


# Rows `run`'s text shows at most: the partitions behind first, then those that copied the most.
ROWS_SHOWN = 50


def _render_cycle(d: dict) -> str:
    """The summary, and a row per partition that copied records or is behind, up to ROWS_SHOWN: on
    a wide link the others would bury them (10,000 rows), so they are counted in a line each, the
    idle ones and the rest (`--json` has every one)."""
    busy, idle = [], 0
    for name, m in d["mirrors"].items():
        for p in m["partitions"]:
            if not p["records"] and not p["lag_after"]:
                idle += 1
            else:
                busy.append((name, p))
    shown = sorted(busy, key=lambda b: (-b[1]["lag_after"], -b[1]["records"]))[:ROWS_SHOWN]
    rows = [
        [
            name,
            p["partition"],
            f"{p['source_from']}..{p['source_until']}",
            f"{p['dest_from']}..{p['dest_until']}",
            p["records"],
            p["lag_after"],
            p["latency_max_ms"] if p["latency_records"] else "-",
        ]
        for name, p in sorted(shown, key=lambda b: (b[0], b[1]["partition"]))
    ]
    text = (
        f"link '{d['link']}': copied {d['records']:,} records ({d['bytes']:,} bytes) in {d['duration_s']:.1f}s "
        f"over {d['work_units']} work units; lag after: {d['lag_after']:,}"
    )
    if rows:
        text += "\n\n" + table(
            ["MIRROR", "PARTITION", "SOURCE RANGE", "MIRROR RANGE", "RECORDS", "LAG", "MAX LATENCY MS"], rows
        )
    if len(busy) > len(rows):
        text += f"\n{len(busy) - len(rows):,} more partition(s) that copied or are behind (`run --json` lists them)"
    if idle:
        text += ("\n" if rows else "\n\n") + f"{idle:,} partition(s) up to date with nothing to copy (not listed)"
    if memory := over_budget_note(d.get("task_memory")):
        text += f"\n{memory}"
    waiting = d.get("not_listed_yet") or []
    if waiting:
        text += (
            f"\n{len(waiting):,} mirror(s) created moments ago not copied yet: the destination does not list "
            f"their topics yet; the next run copies them ({some_of(waiting, shown=5)})"
        )
    return text
