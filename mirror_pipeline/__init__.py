"""mirror-pipeline: Kafka cross-cluster replication engine.

The engine has no Dagster import: the CLI (`mirror_pipeline.cli`) and the
Dagster code location (`assets/`, `resources/`) are thin adapters over it.
"""

__version__ = "0.1.0"
