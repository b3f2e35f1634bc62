"""Promote and failover from the CLI run as the Dagster jobs of the same name.

So a runbook's promote is recorded in the same Dagster instance the UI shows
(`$DAGSTER_HOME`, else `./.dagster-home`), exactly like one launched there.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import DagsterInstance

from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline_dagster.definitions import build_definitions
from mirror_pipeline_dagster.lifecycle_jobs import stop_run_config


def dagster_instance() -> DagsterInstance:
    """The instance `dagster dev` uses when started as the README shows."""
    if not os.environ.get("DAGSTER_HOME"):
        os.environ["DAGSTER_HOME"] = str(ensure_dagster_home(Path(".dagster-home")))
    return DagsterInstance.get()


def launch_stop_job(verb: str, config_path, link: str, topics: list[str], timeout_s: float):
    """Run the promote or failover job in-process, recorded in the Dagster instance."""
    job = build_definitions(config_path).get_job_def(verb)
    run_config = stop_run_config(verb, link, topics, timeout_s)
    # The run's own event log keeps every detail; the terminal gets warnings only.
    run_config["loggers"] = {"console": {"config": {"log_level": "WARNING"}}}
    result = job.execute_in_process(
        run_config=run_config,
        instance=dagster_instance(),
        tags={"mirror-pipeline/link": link, "mirror-pipeline/started-by": "cli"},
        raise_on_error=False,
    )
    if result.success:
        return result.run_id, True, result.output_for_node(f"{verb}_mirrors")
    failures = [e.step_failure_data.error.message.strip() for e in result.all_events if e.is_step_failure]
    return result.run_id, False, "; ".join(failures) or "see the run's logs"
