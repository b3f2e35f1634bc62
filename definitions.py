"""The one Dagster code location of mirror-pipeline (`workspace.yaml` loads this file).

The links come from the configuration file (`$MIRROR_PIPELINE_CONFIG`, else
`./mirror.yaml`), so loading definitions reads and validates that file -- and
does nothing else: no Kafka call, no Spark session. With no file (a fresh
clone) the location loads empty; an invalid file fails loading with the
`ConfigError` message, which names the file, the key and why.
"""

from __future__ import annotations

import logging
from pathlib import Path

from dagster import Definitions

from assets import dagster_name, link_definitions
from assets.lifecycle_jobs import lifecycle_jobs
from mirror_pipeline.config import CONFIG_ENV_VAR, load_config, resolve_config_path
from mirror_pipeline.errors import ConfigError
from resources import MirrorConfigResource, pyspark_resource

log = logging.getLogger("mirror_pipeline.definitions")


def build_definitions(config_path: str | Path | None = None) -> Definitions:
    """All definitions for the links in the config file at `config_path` (or the default path)."""
    path = resolve_config_path(config_path)
    if not path.exists():
        if config_path is None and path == Path("mirror.yaml"):
            log.info("no ./mirror.yaml: loading no links")
        else:
            source = "given" if config_path is not None else f"${CONFIG_ENV_VAR}"
            log.warning(f"configuration file {path} ({source}) does not exist: loading no links")
        return Definitions(resources={"mirror_config": MirrorConfigResource()})

    config = load_config(path)
    _check_unique_names(config.links)
    resources = {
        # Absolute, so runs resolve the same file whatever their working directory.
        "mirror_config": MirrorConfigResource(config_path=str(path.resolve())),
        "pyspark": pyspark_resource(config.spark),
    }
    return Definitions.merge(
        Definitions(resources=resources, jobs=lifecycle_jobs()),
        *(
            link_definitions(name, config.link(name).config_sync_ms, config.link(name).offset_sync_ms)
            for name in sorted(config.links)
        ),
    )


def _check_unique_names(links) -> None:
    by_name: dict[str, list[str]] = {}
    for name in links:
        by_name.setdefault(dagster_name(name), []).append(name)
    clashes = [sorted(names) for names in by_name.values() if len(names) > 1]
    if clashes:
        raise ConfigError(
            "links: "
            + "; ".join(" and ".join(f"'{n}'" for n in names) for names in clashes)
            + " map to the same Dagster name (only [A-Za-z0-9_] is kept); rename one"
        )


defs = build_definitions()
