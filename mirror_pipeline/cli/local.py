"""`mirror-pipeline local ...`: embedded Kafka clusters for demos and tests.

`up` records the cluster count, base port and security mode in
`<dir>/clusters.json`, so `status` and `down` need no flags and a second `up`
restarts the same layout. A secured `up` ends with the client settings for
`mirror.yaml`, each secret a `${VAR}` reference whose value is in an env file
only its owner may read: no secret is ever shown on the terminal.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import yaml

from mirror_pipeline.cli.common import emit, handle_errors, json_option
from mirror_pipeline.cli.local_spark import spark
from mirror_pipeline.cli.values import SafePath, WholeNumber
from mirror_pipeline.local.clusters import (
    DEFAULT_BASE_PORT,
    DEFAULT_COUNT,
    MAX_CLUSTERS,
    PORT_STRIDE,
    ClusterInfo,
    LocalKafka,
    default_root,
)
from mirror_pipeline.local.jars import ensure_kafka_jars, kafka_version
from mirror_pipeline.local.security import MODES, PLAINTEXT, with_references, write_env_file

dir_option = click.option(
    "--dir",
    "root",
    type=SafePath(file_okay=False, path_type=Path),
    default=None,
    help="Where the clusters live [default: $MIRROR_PIPELINE_LOCAL_DIR or ./.local-kafka].",
)


@click.group()
def local() -> None:
    """Run single-node Apache Kafka clusters (KRaft), and a Spark cluster, on this machine."""


local.add_command(spark)


@local.command()
@json_option
@handle_errors
def install(as_json: bool) -> None:
    """Fetch the Kafka jars through Maven (once; cached per user)."""
    lib = ensure_kafka_jars()
    emit(
        {"kafka_version": kafka_version(), "lib": str(lib)},
        as_json,
        lambda d: f"Kafka {d['kafka_version']} jars are in {d['lib']}",
    )


@local.command()
@click.option(
    "--clusters",
    "count",
    type=WholeNumber(1, MAX_CLUSTERS),
    default=None,
    help=f"How many clusters [default: as last time, else {DEFAULT_COUNT}].",
)
@dir_option
@click.option(
    "--base-port",
    type=WholeNumber(1024, 65535),
    default=None,
    help=f"Broker port of the first cluster; cluster i adds i*10000 [default: as last time, else {DEFAULT_BASE_PORT}].",
)
@click.option(
    "--security",
    type=click.Choice(MODES),
    default=None,
    help="plaintext; ssl (mutual TLS); sasl_plaintext or sasl_ssl (SCRAM-SHA-512 users) "
    f"[default: as last time, else {PLAINTEXT}].",
)
@json_option
@handle_errors
def up(count: int | None, root: Path | None, base_port: int | None, security: str | None, as_json: bool) -> None:
    """Start the clusters (idempotent) and wait until each answers.

    With --security other than plaintext, the brokers require authentication
    and authorize with ACLs; `admin` is a super user. The output ends with the
    client settings for mirror.yaml, secrets as ${VAR} references, and the
    env file holding their values (`source` it).

    Example: mirror-pipeline local up --security sasl_ssl
    """
    recorded = LocalKafka.from_root(_root(root))
    count = count if count is not None else recorded.count
    base_port = base_port if base_port is not None else recorded.base_port
    security = security if security is not None else recorded.security
    top = base_port + (count - 1) * PORT_STRIDE + 1  # cluster i: base_port + i*10000 and the next port
    if top > 65535:
        raise click.BadParameter(
            f"{count} cluster(s) from base port {base_port} need ports up to {top}, past 65535; give a base "
            f"port of at most {65535 - (count - 1) * PORT_STRIDE - 1}, or fewer clusters",
            param_hint=["--base-port", "--clusters"],
        )
    kafka = LocalKafka(recorded.root, count=count, base_port=base_port, security=security)
    started = time.monotonic()
    infos = kafka.up()
    elapsed = time.monotonic() - started
    clients, env_file = _link_settings(kafka)
    emit(
        [{**i.to_dict(), "security": security, "client": clients[i.name], "env_file": env_file} for i in infos],
        as_json,
        lambda _: (
            "\n".join(_line(i, security) for i in infos)
            + f"\nready in {elapsed:.1f} s"
            + _render_settings(kafka, clients, env_file)
        ),
    )


def _link_settings(kafka: LocalKafka) -> tuple[dict[str, dict[str, str]], str | None]:
    """Per cluster, the admin's client settings with secrets as `${VAR}`; the env file with their values."""
    clients: dict[str, dict[str, str]] = {}
    values: dict[str, Any] = {}
    for name in kafka.names:
        clients[name], secrets = with_references(name, kafka.client_properties(cluster=name))
        values.update(secrets)
    return clients, str(write_env_file(kafka.root, values)) if values else None


def _render_settings(kafka: LocalKafka, clients: dict[str, dict[str, str]], env_file: str | None) -> str:
    if kafka.security == PLAINTEXT:
        return ""
    snippet = yaml.safe_dump({"clusters": clients}, sort_keys=False, default_flow_style=False)
    where = (
        f"their values are in {env_file} (yours only): `source` it before running mirror-pipeline"
        if env_file
        else f"no secrets: the certificates and keys are files under {kafka.root / 'tls'}"
    )
    return (
        f"\n\nclient settings for mirror.yaml (user admin, a super user; {kafka.security}):\n{snippet}"
        f"secrets are ${{VAR}} references; {where}"
    )


@local.command()
@dir_option
@json_option
@handle_errors
def status(root: Path | None, as_json: bool) -> None:
    """Show each cluster, its bootstrap address, whether it runs and its security mode."""
    kafka = LocalKafka.from_root(_root(root))
    infos = kafka.status()
    emit([i.to_dict() for i in infos], as_json, lambda _: _render_status(infos, kafka.security))


@local.command()
@dir_option
@json_option
@handle_errors
def down(root: Path | None, as_json: bool) -> None:
    """Stop the clusters that `up` started (data is kept)."""
    stopped = LocalKafka.from_root(_root(root)).down()
    emit(
        [i.to_dict() for i in stopped],
        as_json,
        lambda _: "\n".join(f"stopped {i.name} (pid {i.pid})" for i in stopped) or "no local Kafka cluster was running",
    )


def _root(root: Path | None) -> Path:
    return root if root is not None else default_root()


def _line(info: ClusterInfo, security: str) -> str:
    state = f"running (pid {info.pid})" if info.running else "stopped"
    return f"{info.name:<12} {info.bootstrap:<18} {state:<22} {security:<14} {info.data_dir}"


def _render_status(infos: list[ClusterInfo], security: str) -> str:
    lines = [_line(i, security) for i in infos]
    if not any(i.running for i in infos):
        lines.append("no local Kafka cluster is running; start them with `mirror-pipeline local up`")
    return "\n".join(lines)
