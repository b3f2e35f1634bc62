"""The local Spark cluster's daemons: where each one's ports and files are, and what is reported about it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SparkDaemon:
    """Where one daemon's ports and files are; pure layout, no process state."""

    name: str  # master, worker-1, worker-2, connect
    port: int
    ui_port: int | None
    dir: Path

    @property
    def properties(self) -> Path:
        return self.dir / "spark.properties"

    @property
    def pid_file(self) -> Path:
        return self.dir / "pid"

    @property
    def console_log(self) -> Path:
        return self.dir / "console.log"

    @property
    def address(self) -> str:
        scheme = {"master": "spark://", "connect": "sc://"}.get(self.name, "")
        return f"{scheme}127.0.0.1:{self.port}"


@dataclass(frozen=True)
class DaemonInfo:
    """What `up`, `status` and `down` report about one daemon."""

    name: str
    address: str
    ui: str | None
    running: bool
    pid: int | None
    log: Path

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "ui": self.ui,
            "running": self.running,
            "pid": self.pid,
            "log": str(self.log),
        }
