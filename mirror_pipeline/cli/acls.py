"""`mirror-pipeline link acls LINK`: the least privilege of a link's two principals (R-ACL-3)."""

from __future__ import annotations

import click

from mirror_pipeline import engine
from mirror_pipeline.cli.common import config_option, emit, handle_errors, json_option, load, table
from mirror_pipeline.cli.values import GROUP, LINK, TOPIC, NamePattern


@click.command("acls")
@click.argument("name", type=LINK)
@click.option(
    "--topic",
    "topics",
    multiple=True,
    required=True,
    type=NamePattern(TOPIC),
    help="A source topic the link mirrors: a name, `prefix*`, or `*` (repeat the option).",
)
@click.option(
    "--group",
    "groups",
    multiple=True,
    type=NamePattern(GROUP),
    help="A source consumer group whose offsets it syncs: a name, `prefix*`, or `*` (repeat).",
)
@config_option
@json_option
@handle_errors
def acls(name: str, topics: tuple[str, ...], groups: tuple[str, ...], config_path: str | None, as_json: bool) -> None:
    """Show the ACLs the link's source and destination principals need, and nothing more.

    The source principal only reads. Grant these on clusters with an
    authorizer; reads no cluster.

    Example: mirror-pipeline link acls west-to-east --topic 'orders' --topic 'pay.*' --group 'billing'
    """
    config = load(config_path, name, given_as="NAME")
    data = {"link": name, **engine.required_acls(config, name, list(topics), list(groups))}
    emit(data, as_json, _render)


def _render(d: dict) -> str:
    parts = []
    for side in ("source", "destination"):
        rows = [[g["resource"], g["pattern"], g["name"], ",".join(g["operations"]), g["why"]] for g in d[side]]
        parts.append(
            f"{side} principal (link '{d['link']}'):\n"
            + table(["RESOURCE", "PATTERN", "NAME", "OPERATIONS", "WHY"], rows)
        )
    return "\n\n".join(parts)
