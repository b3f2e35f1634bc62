"""`mirror-pipeline mirror pause|resume|promote|failover|delete|reverse`: the runbook verbs (R-LC, R-ORC-3).

Promote, failover and reverse launch the Dagster jobs of the same name, so a run
started here is recorded in the same Dagster instance the UI shows
(`$DAGSTER_HOME`, else `./.dagster-home`).

Given several mirrors a verb is all or nothing: a request one of them cannot
go with is refused naming each, and nothing changes (promote, failover and
reverse are refused before a Dagster run is launched). A verb that fails
part-way prints what it did all the same, then the error saying which
mirrors changed and which did not; exit code 1.
"""

from __future__ import annotations

from typing import NoReturn

import click

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline import engine
from mirror_pipeline.cli.common import (
    config_option,
    debug_requested,
    emit,
    fail,
    handle_errors,
    json_option,
    link_option,
    load,
    table,
)
from mirror_pipeline.cli.values import LINK, TOPIC, Seconds
from mirror_pipeline.operations.all_or_nothing import DONE

topics_argument = click.argument("topics", nargs=-1, type=TOPIC)
all_option = click.option("--all", "all_mirrors", is_flag=True, help="Every mirror of the link.")


def _chosen(topics: tuple[str, ...], all_mirrors: bool) -> list[str] | None:
    if all_mirrors and topics:
        raise click.UsageError("give mirror topics or --all, not both")
    if not all_mirrors and not topics:
        raise click.UsageError("name the mirror topics, or pass --all for every mirror of the link")
    return None if all_mirrors else list(dict.fromkeys(topics))


def _render(d: dict) -> str:
    rows = [
        [name, m["before"], m["after"], m["said"] + (f"; then: {m['failed_after']}" if m.get("failed_after") else "")]
        for name, m in d["mirrors"].items()
    ]
    done = DONE.get(d.get("verb", ""), "done")
    rows += [[name, m["state"], m["state"], f"not {done}: {m['why']}"] for name, m in d.get("not_done", {}).items()]
    return table(["MIRROR", "BEFORE", "AFTER", "WHAT HAPPENED"], sorted(rows)) if rows else "no mirrors"


def _carry_out(verb, as_json: bool, render=_render) -> None:
    """Print what `verb()` did; when it did not finish, what it did all the same (never undone), then the error."""
    try:
        result = verb()
    except engine.Incomplete as exc:
        emit(exc.result.to_dict(), as_json, render)
        fail(str(exc), as_json)
    emit(result.to_dict(), as_json, render)


def _run_failed(verb: str, run_id: str, output, as_json: bool, render=_render) -> NoReturn:
    """A failed Dagster run: what a verb that did not finish did, then the run's message."""
    done = getattr(output, "result", None)
    if done:
        emit({**done, "dagster_run_id": run_id}, as_json, render)
    fail(f"{verb} failed (Dagster run {run_id}): {output}", as_json)


def register(group: click.Group) -> None:
    for verb, doc in (
        ("pause", "Pause mirrors: they copy nothing until resumed, and their lag grows."),
        ("resume", "Resume paused mirrors."),
    ):
        group.command(verb, help=f"{doc}\n\nExample: mirror-pipeline mirror {verb} orders --link west-to-east")(
            topics_argument(link_option(all_option(config_option(json_option(handle_errors(_simple(verb)))))))
        )
    group.add_command(promote)
    group.add_command(failover)
    group.add_command(delete)
    group.add_command(reverse)


def _simple(verb: str):
    def command(topics, link, all_mirrors, config_path, as_json):
        chosen = _chosen(topics, all_mirrors)
        config = load(config_path, link)
        _carry_out(lambda: getattr(engine, verb)(config, link, chosen), as_json)

    return command


@click.command()
@topics_argument
@link_option
@all_option
@click.option("--dry-run", is_flag=True, help="Show what is not mirrored yet; change nothing.")
@click.option(
    "--timeout",
    "timeout_s",
    type=Seconds(),
    default=300.0,
    show_default=True,
    help="Seconds to wait for the lag to reach zero (1 to 604800).",
)
@config_option
@json_option
@handle_errors
def promote(topics, link, all_mirrors, dry_run, timeout_s, config_path, as_json):
    """Planned migration: finish copying, verify zero lag, then make the mirrors normal topics.

    Refused when the source cluster does not answer (use failover). Irreversible.

    Example: mirror-pipeline mirror promote orders --link west-to-east --dry-run
    """
    _stop("promote", topics, link, all_mirrors, dry_run, config_path, as_json, timeout_s)


@click.command()
@topics_argument
@link_option
@all_option
@click.option("--dry-run", is_flag=True, help="Show what a failover would leave behind; change nothing.")
@config_option
@json_option
@handle_errors
def failover(topics, link, all_mirrors, dry_run, config_path, as_json):
    """Disaster failover: stop the mirrors now, whatever the lag or the source's state.

    On a mirror waiting in PENDING_STOPPED it cancels the wait. Irreversible.

    Example: mirror-pipeline mirror failover orders --link west-to-east
    """
    _stop("failover", topics, link, all_mirrors, dry_run, config_path, as_json)


@click.command()
@click.argument("topics", nargs=-1, required=True, type=TOPIC)
@link_option
@config_option
@json_option
@handle_errors
def delete(topics, link, config_path, as_json):
    """Stop mirroring for good: the mirror topic is deleted from the destination.

    A STOPPED mirror is a normal topic by then: only the link's record of it is
    forgotten. Nothing on the source is ever touched.

    Example: mirror-pipeline mirror delete orders --link west-to-east
    """
    config = load(config_path, link)
    _carry_out(lambda: engine.delete_mirrors(config, link, list(dict.fromkeys(topics))), as_json)


def _stop(verb, topics, link, all_mirrors, dry_run, config_path, as_json, timeout_s=300.0):
    chosen = _chosen(topics, all_mirrors)
    config = load(config_path, link)
    if dry_run:
        emit(engine.preview_stop(config, link, chosen), as_json, _render_preview)
        return
    # Refused here, every mirror that cannot go named, before a Dagster run is launched and recorded.
    # The job takes names only (no "all" by omission): --all is every mirror the link has now.
    topics = [
        m.mirror_topic for m in engine.check_lifecycle(config, link, verb, engine.list_mirrors(config, link), chosen)
    ]
    if not topics:
        fail(f"--all: link '{link}' has no mirrors to {verb}", as_json)
    run_id, success, output = _dagster_runs().launch_stop_job(
        verb, config.path, link, topics, timeout_s, debug_requested()
    )
    if not success:
        _run_failed(verb, run_id, output, as_json)
    emit({**output, "dagster_run_id": run_id}, as_json, lambda d: _render(d) + f"\n\nDagster run {run_id}")


def _dagster_runs():
    """The Dagster side of the lifecycle verbs, imported when a job is launched (it takes seconds)."""
    return dagster_events.dagster_runs()


@click.command()
@click.argument("topics", nargs=-1, required=True, type=TOPIC)
@link_option
@click.option(
    "--reverse-link",
    default=None,
    type=LINK,
    help="The link copying the other way [default: the one the config declares].",
)
@click.option("--paused", is_flag=True, help="Leave the new mirrors PAUSED (reverse-and-pause) instead of copying.")
@click.option(
    "--realign-groups",
    is_flag=True,
    help="Move consumer groups back to their translation even when that is backwards "
    "(their offsets on the old source are stale once the applications moved).",
)
@click.option("--dry-run", is_flag=True, help="Show per partition what reverse would do and save; change nothing.")
@config_option
@json_option
@handle_errors
def reverse(topics, link, reverse_link, paused, realign_groups, dry_run, config_path, as_json):
    """Failback: make the old sources of stopped mirrors follow them (R-LC-7).

    After promote or failover of TOPICS on LINK (A -> B), each one's source
    topic on A becomes a mirror of it on the reverse link (B -> A). Where A's
    topic holds exactly what was mirrored, it continues in place with the same
    offsets; otherwise it is rebuilt from B, and every record it would drop
    (a divergent tail, or records B no longer holds) is first saved to
    '<topic>.diverged' on A and reported per partition.

    Example: mirror-pipeline mirror reverse orders --link west-to-east --dry-run
    """
    chosen = list(dict.fromkeys(topics))
    config = load(config_path, link)
    if dry_run:
        emit(engine.reverse(config, link, chosen, reverse_link, dry_run=True).to_dict(), as_json, render_reverse)
        return
    engine.check_lifecycle(config, link, "reverse", engine.list_mirrors(config, link), chosen)
    run_id, success, output = _dagster_runs().launch_reverse_job(
        config.path, link, chosen, reverse_link, not paused, realign_groups, debug_requested()
    )
    if not success:
        _run_failed("reverse", run_id, output, as_json, render_reverse)
    emit({**output, "dagster_run_id": run_id}, as_json, lambda d: render_reverse(d) + f"\n\nDagster run {run_id}")


def render_reverse(d: dict) -> str:
    if not d["mirrors"] and not d.get("not_done"):
        return "no mirrors"
    lines = [f"{name}: not reversed: {m['why']}" for name, m in sorted(d.get("not_done", {}).items())]
    for name, m in sorted(d["mirrors"].items()):
        lines.append(
            f"{name} (link '{d['link']}', {m['before']}): followed by '{m.get('new_mirror')}' on link "
            f"'{m.get('reverse_link')}' ({m['after'] if m['after'] != m['before'] else 'not yet'}): {m['said']}"
        )
        rows = [
            [
                p["partition"],
                p["action"],
                p["source_log_start"],
                p["source_log_end"],
                p["mirrored_up_to"],
                p["saved_records"],
                ", ".join(f"{a}..{b - 1}" for a, b in p["saved_ranges"]) or "-",
                p["reason"],
            ]
            for p in m.get("partitions", [])
        ]
        if rows:
            lines.append(
                table(
                    ["PARTITION", "ACTION", "LOG-START", "LOG-END", "MIRRORED-UP-TO", "SAVED", "SAVED OFFSETS", "WHY"],
                    rows,
                )
            )
        if m.get("saved_topic"):
            lines.append(
                f"saved to: '{m['saved_topic']}' on the old source's cluster (header mirror-pipeline.origin "
                f"names each record's partition and offset)"
            )
        for g in m.get("consumer_groups", []):
            lines.append(f"group '{g['group']}': {g['status']} {g['partitions']}")
        lines += [f"note: {n}" for n in m.get("offset_sync_notes", [])]
        lines += [f"then: {m['failed_after']}"] if m.get("failed_after") else []
    return "\n".join(lines)


def _render_preview(d: dict) -> str:
    rows = []
    for name, m in sorted(d.items()):
        for p in m["partitions"]:
            span = ""
            if p.get("first_unmirrored_timestamp") and p.get("last_source_timestamp"):
                span = f"{(p['last_source_timestamp'] - p['first_unmirrored_timestamp']) / 1000:.1f}s"
            lost = "unknown" if p.get("unmirrored") is None else p["unmirrored"]
            rows.append([name, m["state"], p["partition"], p["mirrored_up_to"], lost, span])
    if not rows:
        return "nothing to stop"
    text = "dry run: nothing changed\n\n" + table(
        ["MIRROR", "STATE", "PARTITION", "MIRRORED UP TO", "NOT MIRRORED (records)", "TIME SPAN"], rows
    )
    groups = [
        [
            g["destination_group"],
            name,
            g["partition"],
            g["source_offset"],
            g["lands_at"],
            "-" if g["destination_offset_before"] is None else g["destination_offset_before"],
            g["action"],
        ]
        for name, m in sorted(d.items())
        for g in m.get("consumer_groups", [])
    ]
    if groups:
        text += "\n\nconsumer groups on the destination after a final offset sync (R-OFS-7):\n\n" + table(
            ["GROUP", "MIRROR", "PARTITION", "SOURCE OFFSET", "LANDS AT", "NOW AT", "ACTION"], groups
        )
    notes = sorted({n for m in d.values() for n in m.get("offset_sync_notes", [])})
    return text + "".join(f"\nnote: {n}" for n in notes)
