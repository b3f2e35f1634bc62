"""Ports for the servers a test starts: asked of the OS, never fixed (see docs/deploying.md on port ranges)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 the OS says is free now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
