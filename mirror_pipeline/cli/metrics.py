"""`mirror-pipeline metrics serve|show`: the R-OBS-1 metrics of the config's links, over a sliding window.

`serve` is the long-running Prometheus exporter; `show` prints the same
windows once, for a runbook or a terminal. Both read the copies and offset
syncs recorded in the Dagster instance (`$DAGSTER_HOME`, else
`./.dagster-home`) and sample lag and states from the clusters (see
`metrics_exporter`).
"""

from __future__ import annotations

import signal
import threading

import click

import mirror_pipeline.cli.dagster_events as dagster_events
from mirror_pipeline.cli.common import config_option, emit, handle_errors, json_option, load, table
from mirror_pipeline.cli.listening import check_host_text, check_port_free
from mirror_pipeline.cli.signals import stop_on_signals
from mirror_pipeline.cli.values import LINK
from mirror_pipeline.model.metrics import DEFAULT_WINDOW_S
from mirror_pipeline.model.states import state_summary

DEFAULT_PORT = 9464  # the usual exporter port; below Linux's ephemeral range (32768-60999)
DEFAULT_INTERVAL_S = 15.0

_link_filter = click.option(
    "--link", "links", type=LINK, multiple=True, help="Only this link (repeatable) [default: all]."
)
_window = click.option(
    "--window",
    "window_s",
    type=click.FloatRange(1, 86400),
    default=DEFAULT_WINDOW_S,
    show_default=True,
    help="Length of the sliding window, in seconds.",
)


@click.group()
def metrics() -> None:
    """Replication metrics per mirror and per link: byte rate, latency, checkpoint latency, lag."""


@metrics.command()
@config_option
@_link_filter
@_window
@click.option(
    "--host", "-H", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface)."
)
@click.option(
    "--port", "-p", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True, help="Port to listen on."
)
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(1, 3600),
    default=DEFAULT_INTERVAL_S,
    show_default=True,
    help="Seconds between two samplings of lag and states.",
)
@handle_errors
def serve(
    config_path: str | None, links: tuple[str, ...], window_s: float, host: str, port: int, interval_s: float
) -> None:
    """Serve the metrics in Prometheus text format at http://HOST:PORT/metrics until Ctrl-C.

    \b
    Example:
      mirror-pipeline metrics serve --config mirror.yaml --port 9464
    """
    config = load(config_path)
    for link in links:
        config.link(link)  # an unknown link fails before anything starts
    check_host_text(host)
    check_port_free(host, port, likely="another exporter?")
    exporter = dagster_events.metrics_exporter()
    stop = threading.Event()
    with (
        stop_on_signals(stop, (signal.SIGTERM, signal.SIGHUP)),
        dagster_events.dagster_runs().dagster_instance() as instance,
    ):
        state = exporter.LinkMetrics(config, instance, window_s, links=list(dict.fromkeys(links)))
        click.echo(
            f"Serving metrics of link(s) {', '.join(state.links) or 'none'} at "
            f"http://{host}:{port}/metrics (window {window_s:g}s, sampled every {interval_s:g}s; "
            "Ctrl-C stops)"
        )
        try:
            exporter.serve(state, host, port, interval_s, lambda line: click.echo(f"warning: {line}", err=True), stop)
        except KeyboardInterrupt:
            pass
    click.echo("Stopped.", err=True)


@metrics.command()
@config_option
@_link_filter
@_window
@json_option
@handle_errors
def show(config_path: str | None, links: tuple[str, ...], window_s: float, as_json: bool) -> None:
    """Print every metric's window once (lag and states sampled now).

    \b
    Example:
      mirror-pipeline metrics show --link west-to-east --window 600
    """
    config = load(config_path)
    for link in links:
        config.link(link)
    exporter = dagster_events.metrics_exporter()
    with dagster_events.dagster_runs().dagster_instance() as instance:
        state = exporter.LinkMetrics(config, instance, window_s, links=list(dict.fromkeys(links)))
        state.sample()
        rows = state.rows()
        out = {
            "window_s": window_s,
            "metrics": rows,
            "mirrors_per_state": state.states,
            "not_sampled": {link: why for link, why in state.errors.items() if why},
        }
    emit(out, as_json, _render)


def _render(out: dict) -> str:
    def figure(row: dict, stat: str) -> str:
        value = row.get(stat)
        return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)

    rows = [
        [r["link"], r["topic"] or "(link)", r["metric"], *(figure(r, s) for s in ("count", "min", "max", "avg", "sum"))]
        for r in out["metrics"]
    ]
    lines = [
        f"Window: last {out['window_s']:g}s",
        table(["LINK", "TOPIC", "METRIC", "COUNT", "MIN", "MAX", "AVG", "SUM"], rows),
    ]
    for link, counts in sorted(out["mirrors_per_state"].items()):
        lines.append(f"{link}: {state_summary(counts)}")
    for link, why in sorted(out["not_sampled"].items()):
        lines.append(f"{link}: lag and states not sampled: {why}")
    return "\n".join(lines)
