"""A server command's `--host` and `--port`, checked before anything starts (`ui`, `metrics serve`).

A port in use or a host that cannot be bound is one clear line now, rather
than a server's logs later.
"""

from __future__ import annotations

import errno
import socket

import click

from mirror_pipeline.cli.common import fail
from mirror_pipeline.cli.values import shown


def check_host_text(host: str) -> None:
    if not host or not host.isprintable() or any(c.isspace() for c in host) or len(host) > 253:
        raise click.BadParameter(f"{shown(host)} is not a host name or address", param_hint="'--host'")


def check_port_free(host: str, port: int, likely: str = "another Dagster UI?") -> None:
    """One clear line now, rather than the webserver's logs later."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        fail(f"--host {shown(host)}: cannot be resolved ({getattr(exc, 'strerror', None) or exc})")
    with socket.socket(family, kind, proto) as probe:
        # As uvicorn binds: a port whose last connection is only in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                fail(
                    f"--port {port}: {host_port(host, port)} is already in use ({likely}); "
                    f"stop what listens there or pick another port with --port"
                )
            if exc.errno == errno.EACCES:
                fail(f"--port {port}: not allowed to listen on {host_port(host, port)}; pick a port above 1023")
            fail(f"--host {shown(host)}: cannot listen on {host_port(host, port)} ({exc.strerror or exc})")


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
