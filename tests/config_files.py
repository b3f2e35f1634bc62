"""mirror.yaml files for tests on the local pair."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_pair_config(path: Path, source_bootstrap: str, destination_bootstrap: str, link: str,
                      link_settings: dict | None = None, defaults: dict | None = None) -> Path:
    """A config with clusters us-west -> us-east, one link, and Spark on two local task slots."""
    data = {
        "clusters": {
            "us-west": {"bootstrap.servers": source_bootstrap},
            "us-east": {"bootstrap.servers": destination_bootstrap},
        },
        # Short fence wait: tests kill writers on purpose and need not wait 16 s.
        "defaults": {"mirror.writer.fence.wait.ms": 4000, **(defaults or {})},
        "links": {link: {"source": "us-west", "destination": "us-east", **(link_settings or {})}},
        "spark": {"master": "local[2]"},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
