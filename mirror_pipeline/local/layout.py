"""Where the local clusters are: each one's ports and files, and the root's record of them.

`clusters.json` in the root records the cluster count and base port of the
last `up`, so a later `status`, `down` or `up` finds the same clusters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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


def read_layout(root: Path) -> dict[str, int] | None:
    try:
        data = json.loads((Path(root) / LAYOUT_FILE).read_text())
        return {"count": int(data["count"]), "base_port": int(data["base_port"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_layout(root: Path, count: int, base_port: int) -> None:
    (root / LAYOUT_FILE).write_text(json.dumps({"count": count, "base_port": base_port}) + "\n")
