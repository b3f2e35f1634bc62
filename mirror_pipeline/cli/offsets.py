"""`mirror-pipeline offsets sync|export|translate`: consumer offsets on the destination (R-OFS, R-ORC-2).

`export` writes the reset plan `kafka-consumer-groups --reset-offsets
--from-file F --execute` reads (Kafka's GroupOffsetsResetter.parseResetPlan):
for one `--group`, lines `topic,partition,offset`, applied with that tool's
`--group <destination group>`; for several groups (or all), lines
`group,topic,partition,offset`, applied with `--all-groups` or one `--group`
per group. No header line. Topics are the mirror topics and groups the
destination names: the file is applied on the destination cluster.
"""

from __future__ import annotations

import csv
import io

import click

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline import engine
from mirror_pipeline.cli.common import config_option, emit, fail, handle_errors, json_option, link_option, load, table
from mirror_pipeline.cli.values import GROUP, OFFSET, PARTITION, TOPIC, SafePath, writable_file


@click.group()
def offsets() -> None:
    """Consumer group offsets: sync them to the destination, export them, translate one."""


@offsets.command()
@link_option
@click.option(
    "--mirror", "mirrors", type=TOPIC, multiple=True, help="Only this mirror topic (repeatable) [default: all]."
)
@config_option
@json_option
@handle_errors
def sync(link: str, mirrors: tuple[str, ...], config_path: str | None, as_json: bool) -> None:
    """Sync the offsets of the link's selected consumer groups once (R-OFS-1..4).

    Groups with members on the destination are skipped; no group moves backwards.

    Example: mirror-pipeline offsets sync --link west-to-east
    """
    config = load(config_path, link)
    chosen = list(dict.fromkeys(mirrors))
    dagster_events.load_in_background()
    synced = engine.sync_offsets(config, link, chosen or None)
    result = synced.to_dict()
    emit(result, as_json, _render_sync)
    # Recorded as materializations of the link's `consumer_offsets` asset, as a Dagster run records them.
    dagster_events.record_offset_sync(
        config, link, synced, chosen, origin=f"offsets sync --link {link}", as_json=as_json
    )
    failed = [g["source_group"] for g in result["groups"] if g["status"].startswith("error")]
    if failed:
        fail(f"offsets of {len(failed)} group(s) could not be synced: {', '.join(failed)}", as_json)


def _render_sync(d: dict) -> str:
    latency = "-" if d["checkpoint_latency_ms"] is None else f"{d['checkpoint_latency_ms']:.0f} ms"
    lines = [
        f"link '{d['link']}' ({d['mode']} translation): {len(d['groups'])} group(s), {d['committed']} offset(s) "
        f"committed, offset-sync lag {d['offset_sync_lag']}, checkpoint latency {latency}",
        *[f"note: {n}" for n in d["notes"]],
    ]
    rows = []
    for g in d["groups"]:
        if not g["partitions"]:
            rows.append([g["source_group"], g["destination_group"], "", "", "", "", "", g["status"]])
        for p in g["partitions"]:
            rows.append(
                [
                    g["source_group"],
                    g["destination_group"],
                    p["mirror_topic"],
                    p["partition"],
                    _dash(p["source_offset"]),
                    p["translated_offset"],
                    _dash(p["previous_offset"]),
                    p["action"] if g["status"] == "synced" else f"{p['action']} ({g['status']})",
                ]
            )
    if rows:
        lines += [
            "",
            table(["GROUP", "DEST-GROUP", "MIRROR", "PARTITION", "SOURCE", "LANDS-AT", "BEFORE", "ACTION"], rows),
        ]
    return "\n".join(lines)


def _dash(value) -> str:
    return "-" if value is None else str(value)


@offsets.command()
@link_option
@click.option(
    "--group",
    "groups",
    type=GROUP,
    multiple=True,
    help="Only this group, by its source or destination name (repeatable) [default: all].",
)
@click.option(
    "--output",
    "output",
    type=SafePath(dir_okay=False, writable=True),
    default=None,
    callback=writable_file,
    help="Write the CSV to this file [default: standard output].",
)
@config_option
@json_option
@handle_errors
def export(link: str, groups: tuple[str, ...], output: str | None, config_path: str | None, as_json: bool) -> None:
    """Export the latest checkpoints as a reset plan for kafka-consumer-groups (R-OFS-5).

    With one --group the lines are `topic,partition,offset`; otherwise
    `group,topic,partition,offset`. Apply on the destination, e.g.:

    \b
      mirror-pipeline offsets export --link west-to-east --group orders-app --output plan.csv
      kafka-consumer-groups.sh --bootstrap-server <destination> --group <destination group> \\
        --reset-offsets --from-file plan.csv --execute
    """
    checkpoints = engine.export_offsets(load(config_path, link), link, list(groups) or None)
    if not checkpoints:
        fail(
            f"link '{link}' has no offset checkpoints yet: run `mirror-pipeline offsets sync --link {link}` first",
            as_json,
        )
    with_group = len(groups) != 1
    text = reset_plan(checkpoints, with_group)
    if output:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    if as_json:
        emit(
            {
                "link": link,
                "output": output,
                "format": "group,topic,partition,offset" if with_group else "topic,partition,offset",
                "checkpoints": [c.to_dict() for c in checkpoints],
            },
            True,
            str,
        )
    elif output:
        dest_groups = sorted({c.destination_group for c in checkpoints})
        how = f"--group {dest_groups[0]}" if len(dest_groups) == 1 else "--all-groups (or one --group per group)"
        click.echo(
            f"wrote {len(checkpoints)} offset(s) of {len(dest_groups)} group(s) to {output}; apply on the "
            f"destination with: kafka-consumer-groups --reset-offsets --from-file {output} {how} --execute"
        )
    else:
        click.echo(text, nl=False)


def reset_plan(checkpoints, with_group: bool) -> str:
    """CSV lines `[group,]topic,partition,offset`, no header (what parseResetPlan reads)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for c in checkpoints:
        row = [c.mirror_topic, c.partition, c.translated_offset]
        writer.writerow([c.destination_group, *row] if with_group else row)
    return buf.getvalue()


@offsets.command()
@link_option
@click.option("--topic", type=TOPIC, required=True, help="The source topic, or its mirror topic.")
@click.option("--partition", type=PARTITION, required=True, help="A partition of the topic (0 to 2**31-1).")
@click.option(
    "--offset",
    type=OFFSET,
    required=True,
    help="A consumer position on the source: the next offset to read (0 to 2**63-1).",
)
@click.option(
    "--mode",
    type=click.Choice(["exact", "timestamp"]),
    default=None,
    help="Translation mode [default: the link's offset.translation.mode].",
)
@config_option
@json_option
@handle_errors
def translate(
    link: str, topic: str, partition: int, offset: int, mode: str | None, config_path: str | None, as_json: bool
) -> None:
    """Where a source position lands on the mirror (R-OFS-2, R-OFS-6).

    Example: mirror-pipeline offsets translate --link west-to-east --topic orders --partition 0 --offset 1200
    """
    emit(
        engine.translate_offset(load(config_path, link), link, topic, partition, offset, mode),
        as_json,
        _render_translation,
    )


def _render_translation(d: dict) -> str:
    text = (
        f"{d['source_topic']}[{d['partition']}] offset {d['source_offset']} -> {d['mirror_topic']}[{d['partition']}] "
        f"offset {d['translated_offset']} ({d['mode']}; mirror log {d['mirror_log_start']}..{d['mirror_log_end']})"
    )
    if d["beyond_mirror"]:
        text += "\nthe position is past what is mirrored: it lands on the mirror's log end"
    return text
