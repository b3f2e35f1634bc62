"""The one Dagster code location of mirror-pipeline (`workspace.yaml` loads this module).

Loading reads and validates the configuration file -- and does nothing else:
no Kafka call, no Spark session. The file is `$MIRROR_PIPELINE_CONFIG`, else
the `mirror.yaml` of the project (next to `workspace.yaml`), whatever the
working directory the location starts in. A missing or invalid file fails
loading with a `ConfigError` that names the file, the key and why, so the UI
shows the location's load error instead of a location with no links.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from dagster import BetaWarning, Definitions, definitions

from mirror_pipeline.config.loader import CONFIG_ENV_VAR, DEFAULT_CONFIG_FILE, load_config
from mirror_pipeline.model.errors import ConfigError
from mirror_pipeline.replication import gc_policy
from mirror_pipeline_dagster import dagster_name, link_definitions
from mirror_pipeline_dagster.acl_sync import acl_sync_definitions
from mirror_pipeline_dagster.lifecycle_jobs import lifecycle_jobs
from mirror_pipeline_dagster.resources import MirrorEngine, pyspark_resource
from mirror_pipeline_dagster.source_topics import source_topics_definitions
from mirror_pipeline_dagster.verify_check import verify_definitions

# The project folder: `assets/` (this package) sits in it next to workspace.yaml.
PROJECT_DIR = Path(__file__).resolve().parents[1]


def code_location_config_path() -> Path:
    """$MIRROR_PIPELINE_CONFIG, else the project's mirror.yaml; never relative to the working directory."""
    explicit = os.environ.get(CONFIG_ENV_VAR)
    return Path(explicit).resolve() if explicit else PROJECT_DIR / DEFAULT_CONFIG_FILE


def build_definitions(config_path: str | Path | None = None) -> Definitions:
    """All definitions for the links in the config file at `config_path` (or the code location's file)."""
    path = Path(config_path).resolve() if config_path else code_location_config_path()
    if not path.exists():
        raise ConfigError(
            f"{path}: configuration file not found; the Dagster code location needs one: "
            f"run `mirror-pipeline demo`, copy mirror.example.yaml to {DEFAULT_CONFIG_FILE} "
            f"next to workspace.yaml, or set {CONFIG_ENV_VAR} to the file to use"
        )
    config = load_config(path)
    _check_unique_names(config.links)
    resources = {
        # Absolute, so runs resolve the same file whatever their working directory.
        "mirror_engine": MirrorEngine(config_path=str(path)),
        "pyspark": pyspark_resource(config),
    }
    defs = Definitions.merge(
        Definitions(resources=resources, jobs=lifecycle_jobs()),
        # Upstream of every link's copy asset; chains of links join up (no I/O).
        source_topics_definitions(config),
        *(
            link_definitions(
                name,
                config.link(name).config_sync_ms,
                config.link(name).offset_sync_ms,
                automation_running=config.link(name).automation_running,
                freshness_ms=config.link(name).freshness_ms,
                lag_sensor_interval_s=config.link(name).lag_sensor_interval_s,
                run_max_runtime_s=config.link(name).run_max_runtime_s,
            )
            for name in sorted(config.links)
        ),
        *(verify_definitions(name) for name in sorted(config.links)),
        *(
            acl_sync_definitions(name, config.link(name).acl_sync_ms)
            for name in sorted(config.links)
            if config.link(name).acl_sync_enable
        ),
    )
    with warnings.catch_warnings():
        # Binding resources to a sensor's op job makes Dagster 1.13 warn that the
        # sensor's `owners` is beta, though none is set: noise at every load.
        warnings.simplefilter("ignore", BetaWarning)
        defs.get_repository_def()  # resolved once here; Dagster caches it
    return defs


@definitions
def defs() -> Definitions:
    """What Dagster loads: built when the code location loads, not when this module is imported."""
    gc_policy.apply()  # the processes that load it (code server, runs) plan cycles, as the CLI does
    return build_definitions()


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
