"""Fixtures of the fault-injection suite: a link on the shared local pair and a place for process logs.

`make faults` sets MIRROR_PIPELINE_FAULTS=full for the whole suite (over a
hundred kill points); `make test` runs a seeded slice of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

LINK = "faults"
FULL = os.environ.get("MIRROR_PIPELINE_FAULTS") == "full"


@pytest.fixture
def fault_config(tmp_path: Path, source_bootstrap: str, destination_bootstrap: str):
    """Factory: a mirror.yaml with link `faults` (its own state topics), small chunks, a short fence wait."""

    def write(settings: dict | None = None) -> Path:
        data = {
            "clusters": {
                "us-west": {"bootstrap.servers": source_bootstrap},
                "us-east": {"bootstrap.servers": destination_bootstrap},
            },
            "defaults": {"mirror.writer.fence.wait.ms": 4000, "mirror.chunk.max.records": 2000},
            "links": {LINK: {"source": "us-west", "destination": "us-east",
                             # Its own internal topics: a killed writer here never delays other tests' links.
                             "mirror.state.topic": "_faults.state", "mirror.offset.map.topic": "_faults.offset-map",
                             "mirror.checkpoints.topic": "_faults.checkpoints",
                             **(settings or {})}},
            "spark": {"master": "local[2]"},
        }
        path = tmp_path / "mirror.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"
