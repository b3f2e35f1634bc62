"""Ports for the servers a test starts: asked of the OS, never fixed (see docs/deploying.md on port ranges)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 the OS says is free now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_port_pair(start: int, stop: int) -> int:
    """The first port in start..stop free together with the next one (a local broker's and its controller's).

    Fixed ranges below Linux's ephemeral ports, so a broker's listener never meets an outgoing
    connection's port; searched, so two runs side by side do not collide.
    """
    for port in range(start, stop, 2):
        with socket.socket() as first, socket.socket() as second:
            try:
                for sock, p in ((first, port), (second, port + 1)):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Kafka does
                    sock.bind(("127.0.0.1", p))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port pair in {start}..{stop}")
