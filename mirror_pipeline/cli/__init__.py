"""The `mirror-pipeline` command: runbook verbs over the engine (R-ORC-2)."""

from __future__ import annotations

import click

from mirror_pipeline.cli.demo import demo
from mirror_pipeline.cli.lifecycle import register as register_lifecycle
from mirror_pipeline.cli.link import link
from mirror_pipeline.cli.local import local
from mirror_pipeline.cli.mirror import mirror
from mirror_pipeline.cli.offsets import offsets
from mirror_pipeline.cli.run import run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mirror-pipeline")
def cli() -> None:
    """Kafka cross-cluster replication: mirror topics copied by Spark, orchestrated by Dagster."""


for command in (local, link, mirror, run, demo, offsets):
    cli.add_command(command)
register_lifecycle(mirror)


def main() -> None:
    cli()
