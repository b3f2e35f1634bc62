"""Promote, failover and reverse from the CLI run as the Dagster jobs of the same name.

So a runbook's promote is recorded in the same Dagster instance the UI shows
(`$DAGSTER_HOME`, else `./.dagster-home`), exactly like one launched there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance

from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.cli.values import shown
from mirror_pipeline.model.errors import ConfigError
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.lifecycle_jobs import PARTIAL_RESULT, REVERSE_JOB, reverse_run_config, stop_run_config
from mirror_pipeline_dagster.naming import LINK_TAG
from mirror_pipeline_dagster.run_launcher import in_process_run_tags


def dagster_instance() -> DagsterInstance:
    """The instance `mirror-pipeline ui` uses when started as docs/console.md shows."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        os.environ["DAGSTER_HOME"] = str(ensure_dagster_home(Path(".dagster-home")))
    elif not Path(home).is_dir():
        raise ConfigError(
            f"$DAGSTER_HOME {shown(home)} is not a directory: create it, or unset DAGSTER_HOME "
            f"to record runs in ./.dagster-home"
        )
    return DagsterInstance.get()


def launch_stop_job(verb: str, config_path, link: str, topics: list[str], timeout_s: float, debug: bool = False):
    """Run the promote or failover job in-process, recorded in the Dagster instance (see `launch_job`).

    `topics` names every mirror to stop (the job refuses an empty list: `--all` passes them all by name).
    """
    return launch_job(verb, config_path, link, stop_run_config(verb, link, topics, timeout_s), debug)


def launch_reverse_job(
    config_path,
    link: str,
    topics: list[str],
    reverse_link: str | None,
    start: bool,
    realign_groups: bool,
    debug: bool = False,
):
    """Run the reverse job in-process, recorded in the Dagster instance (see `launch_job`)."""
    run_config = reverse_run_config(link, topics, reverse_link or "", start, realign_groups=realign_groups)
    return launch_job(REVERSE_JOB, config_path, link, run_config, debug)


def launch_job(verb: str, config_path, link: str, run_config: dict, debug: bool = False):
    """Run a lifecycle job in-process, recorded in the Dagster instance.

    Returns (run id, success, the op's output or a `RunFailure`). The run's
    own event log keeps every detail; the terminal gets no stack trace
    unless `debug` asks for Dagster's warnings and errors.
    """
    job = build_definitions(config_path).get_job_def(verb)
    run_config["loggers"] = {"console": {"config": {"log_level": "WARNING" if debug else "CRITICAL"}}}
    result = job.execute_in_process(
        run_config=run_config,
        instance=dagster_instance(),
        # The link's tag: the run queues behind the link's copies, and promote and failover refuse to run without it.
        # This process's id: should the CLI be killed mid-run, run monitoring marks the run failed, freeing the queue.
        tags={LINK_TAG: link, "mirror-pipeline/started-by": "cli", **in_process_run_tags()},
        raise_on_error=False,
    )
    if result.success:
        return result.run_id, True, result.output_for_node(f"{verb}_mirrors")
    return result.run_id, False, RunFailure(failure_message(result.all_events), _partial_result(result.all_events))


@dataclass(frozen=True)
class RunFailure:
    """A failed run's message, and what a lifecycle verb that did not finish did all the same (or None)."""

    message: str
    result: dict | None = None

    def __str__(self) -> str:
        return self.message


def _partial_result(events) -> dict | None:
    """The result a verb that failed part-way attached to its step failure (`lifecycle_jobs.PARTIAL_RESULT`)."""
    for event in events:
        user = event.step_failure_data.user_failure_data if event.is_step_failure else None
        value = (user.metadata or {}).get(PARTIAL_RESULT) if user is not None else None
        if value is not None:
            return value.value
    return None


def failure_message(events) -> str:
    """What went wrong in a failed run, without a stack trace: each step failure's message, else the run's."""
    failures = [_step_failure(e.step_failure_data) for e in events if e.is_step_failure]
    if not failures:
        errors = [
            getattr(e.event_specific_data, "error", None) for e in events if e.is_failure or e.is_resource_init_failure
        ]
        failures = [_error_text(error) for error in errors if error is not None]
    return "; ".join(dict.fromkeys(f for f in failures if f)) or "see the run's logs in the Dagster UI"


def _step_failure(data) -> str:
    # An op's Failure carries the engine's message as its description.
    user = data.user_failure_data
    if user is not None and user.description:
        return user.description.strip()
    return _error_text(data.error) if data.error is not None else ""


def _error_text(error) -> str:
    """`Class: message (caused by Class: message)`, from Dagster's serialized error, without its stack.

    Dagster's own wrappers ("Error occurred while executing op ...") are named
    by their message only; the exception they wrap keeps its class.
    """
    parts: list[str] = []
    while error is not None and len(parts) < 3:
        text = error.message.strip()
        head, sep, rest = text.partition(": ")
        if sep and error.cls_name and head.split(".")[-1] == error.cls_name:
            wrapper = error.cls_name.startswith("Dagster") and error.cause is not None
            text = rest.rstrip(":") if wrapper else f"{error.cls_name}: {rest}"
        parts.append(text)
        error = error.cause
    return " (caused by ".join(parts) + ")" * (len(parts) - 1)
