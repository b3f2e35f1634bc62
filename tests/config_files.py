"""mirror.yaml files for tests on the local pair."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mirror_pipeline.config.loader import parse_config
from mirror_pipeline.model.errors import ConfigError

#: The tests' `mirror.writer.fence.wait.ms`: tests kill writers on purpose and need not wait the default 16 s.
#: A chunk's announcement and records must land within half of it, and a loaded CI machine took over 2 s for
#: one announcement with a 4 s wait (a cycle failed "announcing a chunk took over 2000 ms"): 8 s leaves 4 s.
TEST_FENCE_WAIT_MS = 8000


def write_pair_config(
    path: Path,
    source_bootstrap: str,
    destination_bootstrap: str,
    link: str,
    link_settings: dict | None = None,
    defaults: dict | None = None,
) -> Path:
    """A config with clusters us-west -> us-east, one link, and Spark on two local task slots."""
    data = {
        "clusters": {
            "us-west": {"bootstrap.servers": source_bootstrap},
            "us-east": {"bootstrap.servers": destination_bootstrap},
        },
        "defaults": {"mirror.writer.fence.wait.ms": TEST_FENCE_WAIT_MS, **(defaults or {})},
        "links": {link: {"source": "us-west", "destination": "us-east", **(link_settings or {})}},
        "spark": {"master": "local[2]"},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_two_way_config(
    path: Path,
    west_bootstrap: str,
    east_bootstrap: str,
    forward: str,
    back: str,
    tag: str,
    link_settings: dict | None = None,
    defaults: dict | None = None,
) -> Path:
    """Links both ways between the pair (`forward` us-west -> us-east, `back` the other way), each with
    internal topics of its own named after `tag`, so their records never reach other tests' registries."""

    def link(source: str, destination: str, side: str) -> dict:
        own = {
            f"mirror.{kind}.topic": f"_{tag}-{side}.{kind.replace('.', '-')}"
            for kind in ("state", "offset.map", "checkpoints")
        }
        return {"source": source, "destination": destination, **own, **(link_settings or {})}

    data = {
        "clusters": {
            "us-west": {"bootstrap.servers": west_bootstrap},
            "us-east": {"bootstrap.servers": east_bootstrap},
        },
        "defaults": {"mirror.writer.fence.wait.ms": TEST_FENCE_WAIT_MS, **(defaults or {})},
        "links": {forward: link("us-west", "us-east", "we"), back: link("us-east", "us-west", "ew")},
        "spark": {"master": "local[2]"},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def config_problem(data: dict, env: dict | None = None, source: str = "mirror.yaml") -> str:
    """The error a config document gets at load (`source` its file name); the test fails if it loads."""
    with pytest.raises(ConfigError) as err:
        parse_config(data, source, env or {})
    return str(err.value)
