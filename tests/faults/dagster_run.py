"""One Dagster run of a link's copy asset for one mirror, as a process of its own.

`python -m tests.faults.dagster_run CONFIG LINK MIRROR`: the fault suite kills
it at random moments, as an executor or the run worker of a deployment would
die. The run goes through the project's own definitions and resources.
"""

from __future__ import annotations

import os
import sys

import dagster as dg


def main(config_path: str, link: str, mirror: str) -> int:
    os.environ["MIRROR_PIPELINE_CONFIG"] = config_path
    from mirror_pipeline.config.loader import load_config
    from mirror_pipeline_dagster.definitions import build_definitions
    from mirror_pipeline_dagster.naming import LinkNames, dagster_name
    from mirror_pipeline_dagster.resources import MirrorEngine, pyspark_resource

    defs = build_definitions(config_path)
    names = LinkNames(link)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(names.mirrors_partitions, [mirror])
    result = dg.materialize(
        [defs.get_assets_def(names.mirror_data_key)],
        partition_key=mirror,
        resources={
            "mirror_engine": MirrorEngine(config_path=config_path),
            "pyspark": pyspark_resource(load_config(config_path)),
        },
        instance=instance,
        raise_on_error=False,
        tags={"fault-suite": dagster_name(link)},
    )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
