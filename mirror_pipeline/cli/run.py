"""`mirror-pipeline run`: one replication cycle of a link, without the Dagster daemon."""

from __future__ import annotations

import sys

import click

from mirror_pipeline.cli.common import config_option, emit, fail, handle_errors, json_option, link_option, load, table


@click.command()
@link_option
@click.option("--mirror", "mirrors", multiple=True, help="Only this mirror topic (repeatable) [default: all].")
@config_option
@json_option
@handle_errors
def run(link: str, mirrors: tuple[str, ...], config_path: str | None, as_json: bool) -> None:
    """Run one replication cycle of a link: plan, copy in one Spark job, record.

    On a terminal, a long copy shows records copied of records to copy.

    Example: mirror-pipeline run --link west-to-east
    """
    from mirror_pipeline import engine
    from mirror_pipeline.spark import spark_session

    config = load(config_path)
    config.link(link)  # fail on an unknown link before starting Spark
    progress = _terminal_progress() if sys.stderr.isatty() and not as_json else None
    spark = spark_session(config.spark)
    try:
        result = engine.run_cycle(config, link, spark, mirrors=list(mirrors) or None, progress=progress)
    except engine.CycleFailed as exc:
        emit(exc.result.to_dict(), as_json, _render_cycle)
        fail(str(exc), as_json)
    finally:
        if progress:
            click.echo("", err=True)
    emit(result.to_dict(), as_json, _render_cycle)


def _terminal_progress():
    def show(done: int, total: int) -> None:
        pct = 100 * done / total if total else 100
        click.echo(f"\rcopied {done:,} of {total:,} records ({pct:.0f}%)", err=True, nl=False)

    return show


def _render_cycle(d: dict) -> str:
    rows = []
    for name, m in d["mirrors"].items():
        for p in m["partitions"]:
            rows.append([name, p["partition"], f"{p['source_from']}..{p['source_until']}",
                         f"{p['dest_from']}..{p['dest_until']}", p["records"], p["lag_after"]])
    summary = (
        f"link '{d['link']}': copied {d['records']:,} records ({d['bytes']:,} bytes) in {d['duration_s']:.1f}s "
        f"over {d['work_units']} work units; lag after: {d['lag_after']:,}"
    )
    if not rows:
        return summary
    return summary + "\n\n" + table(["MIRROR", "PARTITION", "SOURCE RANGE", "MIRROR RANGE", "RECORDS", "LAG"], rows)
