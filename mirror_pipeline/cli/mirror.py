"""`mirror-pipeline mirror ...`: create, list and describe mirror topics.

`create` registers the mirror as a partition of the link's Dagster assets (see `dagster_events`).
"""

from __future__ import annotations

import click

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline import engine
from mirror_pipeline.cli.common import config_option, emit, handle_errors, json_option, link_option, load, table
from mirror_pipeline.cli.values import TOPIC


@click.group()
def mirror() -> None:
    """Mirror topics: read-only copies of source topics on a link's destination."""


@mirror.command()
@click.argument("source_topic", type=TOPIC)
@link_option
@click.option(
    "--mirror-topic",
    type=TOPIC,
    default=None,
    help="Name on the destination [default: the link's naming of SOURCE_TOPIC].",
)
@config_option
@json_option
@handle_errors
def create(source_topic: str, link: str, mirror_topic: str | None, config_path: str | None, as_json: bool) -> None:
    """Create a mirror of SOURCE_TOPIC on the link's destination.

    The mirror gets the source's partition count and synced configs. Running it
    again for the same topic reports the existing mirror and changes nothing.

    Example: mirror-pipeline mirror create orders --link west-to-east
    """
    config = load(config_path, link)
    info, created = engine.ensure_mirror(config, link, source_topic, mirror_topic)
    data = {**info.to_dict(), "created": created}
    emit(
        data,
        as_json,
        lambda d: (
            f"{'created' if d['created'] else 'already exists:'} mirror '{d['mirror_topic']}' of "
            f"'{d['source_topic']}' on link '{d['link']}' ({d['state']})"
        ),
    )
    # A partition of the link's assets at once, not at the lag sensor's next tick.
    dagster_events.register_mirrors(config, link, [info.mirror_topic], as_json=as_json)


@mirror.command("list")
@link_option
@config_option
@json_option
@handle_errors
def list_(link: str, config_path: str | None, as_json: bool) -> None:
    """List the mirrors of a link with their state.

    Example: mirror-pipeline mirror list --link west-to-east --json
    """
    data = [m.to_dict() for m in engine.list_mirrors(load(config_path, link), link)]
    emit(
        data,
        as_json,
        lambda rows: (
            table(["MIRROR", "SOURCE", "STATE"], [[r["mirror_topic"], r["source_topic"], r["state"]] for r in rows])
            if rows
            else f"no mirrors on link '{link}'"
        ),
    )


@mirror.command()
@click.argument("mirror_topic", type=TOPIC)
@link_option
@config_option
@json_option
@handle_errors
def describe(mirror_topic: str, link: str, config_path: str | None, as_json: bool) -> None:
    """Show a mirror's state, per-partition offsets and lag.

    Example: mirror-pipeline mirror describe orders --link west-to-east
    """
    emit(engine.describe_mirror(load(config_path, link), link, mirror_topic).to_dict(), as_json, render_description)


def _when(ts: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _known(value) -> str:
    """A figure, or '?' when its cluster did not say (never a misleading 0)."""
    return "?" if value is None else str(value)


def render_description(d: dict) -> str:
    head = [
        f"mirror:     {d['mirror_topic']}  (source '{d['source_topic']}', link '{d['link']}')",
        f"state:      {d['state']} since {_when(d['state_time'])}  ({d['reason']})",
        f"partitions: {d['mirror_partitions']} (source {_known(d['source_partitions'])})",
        f"lag:        {_known(d['lag'])} records",
        f"offsets:    {d['offsets']}",
        f"timestamps: source type {_known(d['source_timestamp_type'])}",
    ]
    if d.get("source_unknown"):
        head.insert(2, f"source:     unknown, '?' below: {d['source_unknown']}")
    if d["flags"]:
        head.append(f"flags:      {', '.join(d['flags'])}  (copying refused: {d['reason']})")
    if d.get("reverse_of"):
        r = d["reverse_of"]
        progress = "" if r.get("phase") == "done" else f"; in progress ({r.get('phase')}): run reverse again to finish"
        saved = f"; records it would have dropped saved to '{r['saved_topic']}'" if r.get("saved_topic") else ""
        head.append(
            f"reversed:   made by reverse of mirror '{r.get('mirror')}' on link '{r.get('link')}' "
            f"({r.get('action')}){saved}{progress}"
        )
    if d.get("read_only"):
        head.append(f"read-only:  {d['read_only']}")
    if d["failing_since"]:
        head.append(
            f"failing:    source topic unusable since {_when(d['failing_since'])}; FAILED after the retry timeout"
        )
    if d["state"] == "STOPPED":
        offsets = ", ".join(f"p{p}={o}" for p, o in sorted(d["last_source_offsets"].items(), key=lambda kv: int(kv[0])))
        head.append(f"stopped:    {_when(d['stopped_at'])}; last source offsets fetched: {offsets}")
    cfg = d.get("config") or {}
    if cfg.get("in_sync") is not None:
        drift = ", ".join(
            f"{k}: {v[0]} -> {v[1]}" if isinstance(v, (list, tuple)) else f"{k}={v}"
            for k, v in sorted((cfg.get("drift") or {}).items())
        )
        lag_s = (cfg.get("config_sync_lag_ms") or 0) / 1000
        head.append(f"config:     {'in sync' if cfg['in_sync'] else 'drift: ' + drift}; config-sync lag {lag_s:.0f}s")
        if cfg.get("overridden"):
            head.append(f"overridden: {', '.join(f'{k}={v}' for k, v in sorted(cfg['overridden'].items()))} (kept)")
    if d["held_back_configs"]:
        held = ", ".join(f"{k}={v}" for k, v in sorted(d["held_back_configs"].items()))
        when = "applied when it stopped" if d["state"] == "STOPPED" else "held back until promote/failover"
        head.append(f"source timestamp settings {when}: {held}")
    rows = [
        [
            p["partition"],
            _known(p["source_log_start"]),
            _known(p["source_log_end"]),
            p["mirror_log_start"],
            p["mirror_log_end"],
            _known(p["next_source_offset"]),
            _known(p["lag"]),
            "preserved" if p["offsets_preserved"] else f"map ({p['offset_map_runs']} runs)",
        ]
        for p in d["partitions"]
    ]
    return (
        "\n".join(head)
        + "\n\n"
        + table(["PARTITION", "SRC-START", "SRC-END", "MIRROR-START", "MIRROR-END", "NEXT-SRC", "LAG", "OFFSETS"], rows)
    )
