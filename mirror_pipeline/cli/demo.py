"""`mirror-pipeline demo`: the Quickstart's end-to-end demonstration."""

from __future__ import annotations

import sys
from pathlib import Path

import click

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline.cli.common import ensure_dagster_home, fail, handle_errors
from mirror_pipeline.cli.mirror import render_description
from mirror_pipeline.cli.values import SafePath, WholeNumber, writable_file
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.demo import GROUP, LINK, run_demo
from mirror_pipeline.engine import describe_mirror


@click.command()
@click.option(
    "--records",
    type=WholeNumber(1, 10_000_000),
    default=20_000,
    show_default=True,
    help="How many records to produce into the source topic.",
)
@click.option(
    "--config",
    "config_path",
    type=SafePath(dir_okay=False, path_type=Path),
    default=Path("mirror.yaml"),
    callback=writable_file,
    show_default=True,
    help="Where to write the demo's config (an existing file of yours is kept).",
)
@handle_errors
def demo(records: int, config_path: Path) -> None:
    """Start a local Kafka pair, mirror a topic through Spark, and compare both sides.

    Example: mirror-pipeline demo --records 100000
    """

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            click.echo(f"\r    copied {done:,} of {total:,} records", err=True, nl=False)

    ensure_dagster_home(Path(".dagster-home"))  # ready for the `mirror-pipeline ui` line below
    result = run_demo(config_path, records, click.echo, progress)
    if sys.stderr.isatty():
        click.echo("", err=True)
    # The copy and the offset sync show in the Dagster UI as materializations, as a run's would.
    dagster_events.record_demo(load_config(config_path), LINK, result.cycle, result.offset_sync, [result.topic])
    if not result.identical:
        fail(f"mirror differs from source: {result.mismatch}")
    click.echo(
        f"    identical: {result.mirror_records:,} records, same partitions, offsets, keys, values, "
        f"headers and timestamps\n"
    )
    click.echo(render_description(describe_mirror(load_config(config_path), "west-to-east", result.topic).to_dict()))
    click.echo(f"\nconsumer group '{GROUP}' on us-east (offsets preserved, so each lands where it stopped):")
    for partition, (source, landed) in sorted(result.group_offsets.items()):
        click.echo(
            f"    partition {partition}: committed {source:,} on us-west -> "
            f"{landed if landed is None else f'{landed:,}'} on us-east"
        )
    if any(source != landed for source, landed in result.group_offsets.values()):
        fail(f"consumer group '{GROUP}' did not land where it stopped on the source")
    click.echo(
        "\nNext:\n"
        f"  .venv/bin/mirror-pipeline mirror describe {result.topic} --link west-to-east"
        "   # the mirror, per partition\n"
        "  .venv/bin/mirror-pipeline run --link west-to-east                     # one more cycle\n"
        "  .venv/bin/mirror-pipeline offsets export --link west-to-east          # group offsets as a reset plan\n"
        "  .venv/bin/mirror-pipeline ui                                          # the Dagster UI (and daemon)\n"
        "  .venv/bin/mirror-pipeline metrics show                                # byte rate, latency, lag over 5 min\n"
        "  .venv/bin/mirror-pipeline local down                                   # stop the clusters"
    )
