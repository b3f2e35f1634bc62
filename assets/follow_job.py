"""Per link, the follow job (always-on, R-EX-4): follow mode as one long-running Dagster run.

Launched from the Launchpad (or by a runbook through Dagster's API), its one
op runs `mirror-pipeline run --link L --follow` in a process of its own
through Dagster Pipes: each epoch's line reaches the run's log, and each epoch
is recorded as a `mirror_data` materialization, as the CLI records it.
Terminate in the UI stops it gracefully: Pipes forwards the termination as
SIGINT, the epoch in flight finishes and is recorded, then the run ends. A
kill of the run loses nothing either: the next plan repairs what it left.

While a follow run is in progress the replicate schedule and the lag sensor
skip (two copiers of one partition would fence each other at every turn);
lifecycle verbs are not held back: a promote or failover fences the follow
run's tasks and wins.
"""

# No `from __future__ import annotations`: Dagster reads the op signatures' types.
import os
import sys

from dagster import (
    Config,
    Failure,
    JobDefinition,
    OpExecutionContext,
    PipesSubprocessClient,
    in_process_executor,
    job,
    op,
)
from dagster._core.errors import DagsterPipesExecutionError
from pydantic import Field

from mirror_pipeline.operations.follow import DEFAULT_EPOCH_S, RUN_WORKER_PID_ENV
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine

# After Terminate, how long the run waits for the epoch in flight beyond the epoch's own length.
STOP_MARGIN_S = 60.0


class FollowConfig(Config):
    epoch_seconds: float = Field(
        DEFAULT_EPOCH_S,
        ge=1,
        le=3600,
        description="How long each epoch's tasks copy before the epoch is recorded and "
        "replanned; Terminate waits for the epoch in flight.",
    )


def follow_command(link: str, config_path: str, epoch_seconds: float) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "mirror_pipeline",
        "run",
        "--link",
        link,
        "--follow",
        "--epoch-seconds",
        str(epoch_seconds),
    ]
    return command + (["--config", config_path] if config_path else [])


def build_follow_job(names: LinkNames) -> JobDefinition:
    @op(
        name=f"{names.group}_follow_epochs",
        description=(
            f"Keep link '{names.link}''s mirrors copying as records arrive, epoch after epoch, until the run is "
            "terminated (which finishes the epoch in flight)."
        ),
    )
    def follow_op(context: OpExecutionContext, config: FollowConfig, mirror_engine: MirrorEngine) -> None:
        client = PipesSubprocessClient(
            env={RUN_WORKER_PID_ENV: str(os.getpid())},
            termination_timeout_seconds=config.epoch_seconds + STOP_MARGIN_S,
        )
        try:
            client.run(
                context=context,
                command=follow_command(names.link, mirror_engine.config_path or "", config.epoch_seconds),
            )
        except DagsterPipesExecutionError as exc:
            raise Failure(
                description=f"follow mode of link '{names.link}' ended with an error: {exc} (its log above says why)"
            ) from exc

    # In process: follow mode is then a child of the run worker itself, and stops by itself when
    # that worker is killed (`cli.follow`); under a step subprocess it would copy on, parented by a
    # step process that outlived the failed run.
    @job(
        name=names.follow_job,
        tags=names.follow_tags,
        executor_def=in_process_executor,
        description=(
            f"Always-on replication of link '{names.link}': one long-lived Spark application copies records as they "
            f"arrive. Launch it from the Launchpad; Terminate stops it after the epoch in flight."
        ),
    )
    def follow_job():
        follow_op()

    return follow_job
