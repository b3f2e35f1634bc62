"""The latency benchmark's sensor mode: the link's own Dagster automation, as a deployment runs it.

`mirror-pipeline ui` starts the code server, the daemon and the webserver on a
Dagster home of the benchmark's own (`deploy/dagster.yaml`'s run queue); the
link's config turns its automation on (`dagster.automation.running`), so the
daemon runs the lag sensor, which asks for a replicate run whenever a mirror
lags and none is in progress, and the run queue launches it as a run worker
of its own, with Spark through the Connect server. Everything between a
record's arrival on the source and the run that copies it is counted: the
sensor's tick, the queue, the run worker's start, the cycle, the recording.
"""

from __future__ import annotations

import signal
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

from benchmarks.common import say
from benchmarks.latency_copiers import ProcessCopier, cli_command, cli_env

STOP_TIMEOUT_S = 60


class SensorRuns(ProcessCopier):
    """`mirror-pipeline ui` over a config whose link has its automation on; stopped like Ctrl-C stops it."""

    warm_up = True  # measured once running: the code server's load and the first run's executors excluded

    def __init__(
        self, name: str, config: Path, link: str, source_topic: str, mirror_topic: str, workdir: Path, ui_port: int
    ):
        super().__init__(source_topic, mirror_topic)
        self.name, self.config, self.link, self.ui_port = name, config, link, ui_port
        self.home = workdir / f"{name}-dagster-home"
        self.workdir = workdir
        self.log = workdir / f"{name}-ui.log"
        self.result = {"log": str(self.log), "dagster_home": str(self.home)}

    def start(self, t0: float) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = [*cli_command(), "ui", "--config", str(self.config), "--host", "127.0.0.1", "--port", str(self.ui_port)]
        say(f"{self.name}: starting {' '.join(cmd[-7:])} (DAGSTER_HOME {self.home}, log: {self.log})")
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env={**cli_env(), "DAGSTER_HOME": str(self.home)},
                start_new_session=True,
            )

    def stop(self) -> None:
        """SIGINT, as Ctrl-C: `ui` stops the webserver, the daemon and the code server; a run in flight is killed."""
        self.stop_process(signal.SIGINT, STOP_TIMEOUT_S)

    def info(self) -> dict[str, Any]:
        return {**self.result, **self._runs()}

    def _runs(self) -> dict[str, Any]:
        """The runs the daemon launched, from the Dagster home: how many, their status and length."""
        try:
            import dagster as dg

            with dg.DagsterInstance.from_config(str(self.home)) as instance:
                records = instance.get_run_records(filters=dg.RunsFilter(tags={"mirror-pipeline/link": self.link}))
        except Exception as exc:  # noqa: BLE001 - the figures stand without the runs' details
            return {"runs_error": f"{type(exc).__name__}: {exc}"}
        walls = [r.end_time - r.start_time for r in records if r.start_time and r.end_time]
        statuses: dict[str, int] = {}
        for r in records:
            statuses[r.dagster_run.status.value] = statuses.get(r.dagster_run.status.value, 0) + 1
        launched = sorted(r.create_timestamp.timestamp() for r in records)
        gaps = [b - a for a, b in pairwise(launched)]
        return {
            "dagster_runs": len(records),
            "run_statuses": statuses,
            "run_wall_s_mean": round(sum(walls) / len(walls), 2) if walls else None,
            "run_wall_s_max": round(max(walls), 2) if walls else None,
            "run_interval_s_mean": round(sum(gaps) / len(gaps), 2) if gaps else None,
        }
