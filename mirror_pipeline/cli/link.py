"""`mirror-pipeline link ...`: the links declared in the config."""

from __future__ import annotations

import time

import click

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline import engine
from mirror_pipeline.cli.common import (
    config_option,
    emit,
    fail,
    handle_errors,
    json_option,
    load,
    refuse_unknown_mirrors,
    table,
)
from mirror_pipeline.cli.values import LINK, TOPIC
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError
from mirror_pipeline.model.text import NAMES_SHOWN, some_of


@click.group()
def link() -> None:
    """Links: one-way replication flows between two clusters."""


@link.command("list")
@config_option
@json_option
@handle_errors
def list_(config_path: str | None, as_json: bool) -> None:
    """List the links of the config file.

    Example: mirror-pipeline link list --json
    """
    config = load(config_path)
    data = [
        {"link": link.name, "source": link.source, "destination": link.destination, "prefix": link.prefix}
        for link in config.links.values()
    ]
    emit(
        data,
        as_json,
        lambda rows: table(
            ["LINK", "SOURCE", "DESTINATION", "PREFIX"],
            [[r["link"], r["source"], r["destination"], r["prefix"] or "-"] for r in rows],
        ),
    )


@link.command()
@click.argument("name", type=LINK)
@config_option
@json_option
@handle_errors
def describe(name: str, config_path: str | None, as_json: bool) -> None:
    """Show a link's settings (secrets redacted) and its mirrors.

    Example: mirror-pipeline link describe west-to-east
    """
    config = load(config_path, name, given_as="NAME")
    settings = config.link(name).to_dict()
    # The settings are known without any cluster: a destination that does not
    # answer leaves only the mirrors unknown, said as such.
    try:
        listed, settings["mirror.writer.slots"] = engine.link_mirrors(config, name)
        mirrors, mirrors_unknown = [m.to_dict() for m in listed], ""
    except ClusterUnreachable as exc:
        mirrors, mirrors_unknown = None, str(exc)
    data = {
        "link": name,
        "settings": settings,
        "mirrors": mirrors,
        "mirrors_unknown": mirrors_unknown,
        "source": config.cluster(settings["source"]).redacted(),
        "destination": config.cluster(settings["destination"]).redacted(),
    }
    if config.link(name).acl_sync_enable:
        data["acl_sync"] = _last_acl_sync(config, name, mirrors_unknown)
    data["heartbeats"] = _heartbeats(config, name, mirrors_unknown)
    emit(
        data,
        as_json,
        lambda d: "\n".join(
            [f"link {d['link']}: {settings['source']} -> {settings['destination']}"]
            + [f"  {k}: {v}" for k, v in sorted(d["settings"].items()) if k not in ("source", "destination")]
            + [
                f"  mirrors: unknown: {d['mirrors_unknown']}"
                if d["mirrors"] is None
                else f"  mirrors: {_mirror_names(d['mirrors'])}"
            ]
            + ([f"  last ACL sync: {_render_last_acl_sync(d['acl_sync'])}"] if "acl_sync" in d else [])
            + [f"  heartbeats: {d['heartbeats']['sentence']}"]
        ),
    )


def _heartbeats(config, name: str, destination_unknown: str) -> dict:
    """The newest mirrored heartbeat (R-OBS-3), with its one-line sentence; describe answers without it."""
    if destination_unknown and config.link(name).heartbeats_enabled:
        return {"unknown": destination_unknown, "sentence": f"unknown: {destination_unknown}"}
    try:
        status = engine.heartbeat_status(config, name)
    except MirrorError as exc:
        return {"unknown": str(exc), "sentence": f"unknown: {exc}"}
    return {**status.to_dict(), "sentence": status.sentence()}


def _last_acl_sync(config, name: str, destination_unknown: str) -> dict:
    """The last ACL sync as recorded, or {"unknown": why}: describe answers without it."""
    if destination_unknown:
        return {"unknown": destination_unknown}
    try:
        return engine.acl_sync_status(config, name) or {"never": True}
    except MirrorError as exc:
        return {"unknown": str(exc)}


def _render_last_acl_sync(last: dict) -> str:
    if "unknown" in last:
        return f"unknown: {last['unknown']}"
    if last.get("never"):
        return "never"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last["at"]))
    outcome = f", error: {last['error']}" if last.get("error") else ""
    return f"{when}, {last.get('created', 0)} created, {last.get('deleted', 0)} deleted{outcome}"


@link.command("sync-configs")
@click.argument("name", type=LINK)
@click.option(
    "--mirror", "mirrors", type=TOPIC, multiple=True, help="Only this mirror topic (repeatable) [default: all]."
)
@config_option
@json_option
@handle_errors
def sync_configs(name: str, mirrors: tuple[str, ...], config_path: str | None, as_json: bool) -> None:
    """Sync the topic configs of the link's mirrors from their sources once (R-CS), without the daemon.

    What the Dagster job <link>_config_sync does every topic.config.sync.ms:
    configs that always follow the source are set, overridable ones unless
    overridden on the mirror, LogAppendTime and the timestamp bounds are held
    back while the topic is a mirror, and new source partitions are added.
    Only ACTIVE and PAUSED mirrors are synced. Recorded in the Dagster
    instance the UI reads, as a materialization of <link>/mirror_config.

    Example: mirror-pipeline link sync-configs west-to-east --mirror orders
    """
    config = load(config_path, name, given_as="NAME")
    mirrors = tuple(dict.fromkeys(mirrors))
    if mirrors:  # unknown names fail before anything changes
        refuse_unknown_mirrors(
            mirrors, {m.mirror_topic for m in engine.list_mirrors(config, name)}, name, "--mirror", as_json
        )
    failed = ""
    try:
        result = engine.sync_configs(config, name, mirrors=list(mirrors) or None)
    except engine.ConfigSyncFailed as exc:  # the mirrors that did sync are shown and recorded all the same
        result, failed = exc.result, str(exc)
    emit(result.to_dict(), as_json, _render_config_sync)
    dagster_events.record_config_sync(config, name, result, origin=f"link sync-configs {name}", as_json=as_json)
    if failed:
        fail(failed, as_json)


def _render_config_sync(d: dict) -> str:
    lines = [
        f"link '{d['link']}': {d['configs_changed']} config(s) changed on "
        f"{sum(1 for m in d['mirrors'].values() if m['changed'])} of {len(d['mirrors'])} mirror(s) "
        f"in {d['duration_s']:.1f}s"
    ]
    rows = [
        [
            m,
            "yes" if r["in_sync"] else "no",
            ", ".join(f"{k}: {old} -> {new}" for k, (old, new) in r["changed"].items()) or "-",
            ", ".join(sorted(r["held_back"])) or "-",
            r["error"] or "",
        ]
        for m, r in d["mirrors"].items()
    ]
    if rows:
        lines += ["", table(["MIRROR", "IN SYNC", "CHANGED", "HELD BACK", "ERROR"], rows)]
    lines += [
        f"skipped {m}: it is {state} (only ACTIVE and PAUSED mirrors are synced)" for m, state in d["skipped"].items()
    ]
    return "\n".join(lines)


@link.command("sync-acls")
@click.argument("name", type=LINK)
@click.option("--dry-run", is_flag=True, help="Change nothing; list the bindings that would be created and deleted.")
@config_option
@json_option
@handle_errors
def sync_acls(name: str, dry_run: bool, config_path: str | None, as_json: bool) -> None:
    """Sync the link's ACLs once: the source's bindings that acl.filters select are created on
    the destination (topic names as the link names mirrors), and the bindings this link
    created that the source no longer has are deleted (R-ACL-1). Bindings the link did not
    create are never touched. Both clusters need an authorizer.

    Example: mirror-pipeline link sync-acls west-to-east --dry-run
    """
    config = load(config_path, name, given_as="NAME")
    try:
        result = engine.sync_acls(config, name, dry_run=dry_run).to_dict()
    except engine.AclSyncFailed as exc:
        emit(exc.result.to_dict(), as_json, _render_acl_sync)
        fail(str(exc), as_json)
    emit(result, as_json, _render_acl_sync)


def _render_acl_sync(d: dict) -> str:
    if not d["enabled"]:
        return d["message"]
    verb = ("would create", "would delete") if d["dry_run"] else ("created", "deleted")
    lines = [
        f"link '{d['link']}'{' (dry run)' if d['dry_run'] else ''}: {d['selected']} of {d['source_bindings']} "
        f"source binding(s) selected; {len(d['created'])} {verb[0]}, {len(d['deleted'])} {verb[1]}, "
        f"{d['in_sync_bindings']} already in place, {d['foreign']} destination binding(s) not the link's "
        f"(left alone)"
    ]
    rows = [[verb[0], *_binding_cells(b)] for b in d["created"]] + [[verb[1], *_binding_cells(b)] for b in d["deleted"]]
    if rows:
        lines += [
            "",
            table(["ACTION", "RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"], rows),
        ]
    lines += [f"skipped {_binding_text(s['binding'])}: {s['reason']}" for s in d["skipped"]]
    return "\n".join(lines)


def _binding_cells(b: dict) -> list[str]:
    return [
        b["resourceType"],
        b["name"],
        b["patternType"],
        b["principal"],
        b["host"],
        b["operation"],
        b["permissionType"],
    ]


def _binding_text(b: dict) -> str:
    return (
        f"{b['permissionType']} {b['principal']} {b['operation']} on {b['resourceType']} {b['patternType']} "
        f"'{b['name']}'"
    )


def _mirror_names(mirrors: list[dict]) -> str:
    """The mirrors' names, or on a wide link how many there are and the first few (`--json` has them all)."""
    names = [m["mirror_topic"] for m in mirrors]
    return (
        some_of(names) if len(names) <= NAMES_SHOWN else f"{len(names):,}: {some_of(names)} (`mirror list` lists them)"
    )
