"""The `mirror-pipeline` command: runbook verbs over the engine (R-ORC-2)."""

from __future__ import annotations

import click

from mirror_pipeline.cli.local import local


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mirror-pipeline")
def cli() -> None:
    """Kafka cross-cluster replication: mirror topics copied by Spark, orchestrated by Dagster."""


cli.add_command(local)


def main() -> None:
    cli()
