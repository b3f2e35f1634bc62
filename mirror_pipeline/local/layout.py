"""Where the local clusters are: each one's ports and files, and the root's record of them.

`clusters.json` in the root records the cluster count, base port and security
mode of the last `up`, so a later `status`, `down` or `up` finds the same
clusters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LAYOUT_FILE = "clusters.json"


@dataclass(frozen=True)
class ClusterLayout:
    """Where one cluster's ports and files are; pure layout, no process state."""

    name: str
    port: int
    dir: Path

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def properties(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_dirs(self) -> Path:
        return self.dir / "data"

    @property
    def pid_file(self) -> Path:
        return self.dir / "broker.pid"

    @property
    def server_log(self) -> Path:
        return self.dir / "server.log"

    @property
    def console_log(self) -> Path:
        return self.dir / "console.log"


def read_layout(root: Path) -> dict[str, Any] | None:
    """`{"count", "base_port", "security"}` of the last `up`; a record older than security modes is plaintext."""
    try:
        data = json.loads((Path(root) / LAYOUT_FILE).read_text())
        return {
            "count": int(data["count"]),
            "base_port": int(data["base_port"]),
            "security": str(data.get("security", "plaintext")),
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_layout(root: Path, count: int, base_port: int, security: str = "plaintext") -> None:
    record = {"count": count, "base_port": base_port, "security": security}
    (root / LAYOUT_FILE).write_text(json.dumps(record) + "\n")
