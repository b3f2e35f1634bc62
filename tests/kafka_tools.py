"""Apache Kafka's own command-line tools, run from the project's Kafka jars, as an operator runs them."""

from __future__ import annotations

import subprocess

from mirror_pipeline.local.jars import java_command


def run_kafka_tool(main_class: str, *args: str) -> str:
    """Run the tool `main_class` with `args`; its output (a failure fails the test, showing why)."""
    done = subprocess.run(java_command(main_class, *args), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class WriteQuota:
    """A produce quota for `client_id` on the cluster at `bootstrap` (kafka-configs), from `put` until `lift`."""

    def __init__(self, bootstrap: str, client_id: str):
        self.bootstrap, self.client_id = bootstrap, client_id
        self.on = False

    def put(self, bytes_per_s: int) -> None:
        self._alter("--add-config", f"producer_byte_rate={bytes_per_s}")
        self.on = True

    def lift(self) -> None:
        if self.on:
            self._alter("--delete-config", "producer_byte_rate")
            self.on = False

    def _alter(self, *change: str) -> None:
        run_kafka_tool(
            "kafka.admin.ConfigCommand",
            "--bootstrap-server",
            self.bootstrap,
            "--alter",
            *change,
            "--entity-type",
            "clients",
            "--entity-name",
            self.client_id,
        )
