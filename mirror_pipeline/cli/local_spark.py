"""`mirror-pipeline local spark ...`: a local Spark standalone cluster and Spark Connect server.

`up` records the ports in `<dir>/spark.json`, so `status` and `down` need no
flags and a second `up` finds the same daemons. Its output ends with the
`spark:` settings for mirror.yaml, one for each way of using the cluster.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from mirror_pipeline.cli.common import emit, handle_errors, json_option
from mirror_pipeline.cli.values import SafePath, WholeNumber
from mirror_pipeline.local.clusters import default_root
from mirror_pipeline.local.spark_cluster import DEFAULT_CONNECT_PORT, DEFAULT_MASTER_PORT, WORKERS, LocalSpark
from mirror_pipeline.local.spark_daemons import DaemonInfo

dir_option = click.option(
    "--dir",
    "root",
    type=SafePath(file_okay=False, path_type=Path),
    default=None,
    help="Where the Spark daemons live [default: the local clusters' directory + /spark, "
    "i.e. $MIRROR_PIPELINE_LOCAL_DIR/spark or ./.local-kafka/spark].",
)


@click.group()
def spark() -> None:
    """Run a Spark standalone master, two workers and a Spark Connect server on this machine."""


@spark.command()
@dir_option
@click.option(
    "--master-port",
    type=WholeNumber(1024, 65535 - 1 - 2 * WORKERS),
    default=None,
    help=f"The master's port; its web UI and the workers take the next {1 + 2 * WORKERS} "
    f"[default: as last time, else {DEFAULT_MASTER_PORT}].",
)
@click.option(
    "--connect-port",
    type=WholeNumber(1024, 65535),
    default=None,
    help=f"The Spark Connect server's port [default: as last time, else {DEFAULT_CONNECT_PORT}].",
)
@json_option
@handle_errors
def up(root: Path | None, master_port: int | None, connect_port: int | None, as_json: bool) -> None:
    """Start the daemons (idempotent) and wait until the workers registered and Connect answers.

    Everything comes from the installed pyspark package; executors and the
    Connect server's Python workers run this installation's Python.

    Example: mirror-pipeline local spark up
    """
    recorded = LocalSpark.from_root(_root(root))
    cluster = LocalSpark(recorded.root, master_port or recorded.master_port, connect_port or recorded.connect_port)
    started = time.monotonic()
    infos = cluster.up()
    elapsed = time.monotonic() - started
    emit(
        {"daemons": [i.to_dict() for i in infos], "master": cluster.master_url, "remote": cluster.connect_url},
        as_json,
        lambda _: "\n".join(_line(i) for i in infos) + f"\nready in {elapsed:.1f} s\n\n" + _settings(cluster),
    )


@spark.command()
@dir_option
@json_option
@handle_errors
def status(root: Path | None, as_json: bool) -> None:
    """Show each daemon, its address, whether it runs and its log."""
    infos = LocalSpark.from_root(_root(root)).status()
    emit([i.to_dict() for i in infos], as_json, lambda _: _render_status(infos))


@spark.command()
@dir_option
@json_option
@handle_errors
def down(root: Path | None, as_json: bool) -> None:
    """Stop the daemons that `up` started, with their executors."""
    stopped = LocalSpark.from_root(_root(root)).down()
    emit(
        [i.to_dict() for i in stopped],
        as_json,
        lambda _: "\n".join(f"stopped {i.name} (pid {i.pid})" for i in stopped) or "no local Spark daemon was running",
    )


def _root(root: Path | None) -> Path:
    return root if root is not None else default_root() / "spark"


def _line(info: DaemonInfo) -> str:
    state = f"running (pid {info.pid})" if info.running else "stopped"
    return f"{info.name:<9} {info.address:<26} {state:<22} {info.ui or '':<24} {info.log}"


def _render_status(infos: list[DaemonInfo]) -> str:
    lines = [_line(i) for i in infos]
    if not any(i.running for i in infos):
        lines.append("no local Spark daemon is running; start them with `mirror-pipeline local spark up`")
    return "\n".join(lines)


def _settings(cluster: LocalSpark) -> str:
    return (
        "spark settings for mirror.yaml, either one:\n"
        f"spark:                      # a session on the master: executors on the workers\n"
        f"  master: {cluster.master_url}\n"
        f"spark:                      # a Spark Connect client: jobs run by the Connect server\n"
        f"  remote: {cluster.connect_url}"
    )
