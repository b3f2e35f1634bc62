"""`mirror-pipeline link ...`: the links declared in the config."""

from __future__ import annotations

import click

from mirror_pipeline import engine
from mirror_pipeline.cli.common import config_option, emit, handle_errors, json_option, load, table
from mirror_pipeline.cli.values import LINK
from mirror_pipeline.model.errors import ClusterUnreachable


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
    data = [{"link": l.name, "source": l.source, "destination": l.destination, "prefix": l.prefix} for l in config.links.values()]
    emit(data, as_json, lambda rows: table(["LINK", "SOURCE", "DESTINATION", "PREFIX"],
                                           [[r["link"], r["source"], r["destination"], r["prefix"] or "-"] for r in rows]))


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
        mirrors, mirrors_unknown = [m.to_dict() for m in engine.list_mirrors(config, name)], ""
    except ClusterUnreachable as exc:
        mirrors, mirrors_unknown = None, str(exc)
    data = {"link": name, "settings": settings, "mirrors": mirrors, "mirrors_unknown": mirrors_unknown,
            "source": config.cluster(settings["source"]).redacted(),
            "destination": config.cluster(settings["destination"]).redacted()}
    emit(data, as_json, lambda d: "\n".join(
        [f"link {d['link']}: {settings['source']} -> {settings['destination']}"]
        + [f"  {k}: {v}" for k, v in sorted(d["settings"].items()) if k not in ("source", "destination")]
        + [f"  mirrors: unknown: {d['mirrors_unknown']}" if d["mirrors"] is None
           else f"  mirrors: {', '.join(m['mirror_topic'] for m in d['mirrors']) or 'none'}"]))
