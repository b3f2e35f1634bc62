"""The `mirror-pipeline` command line run as a user runs it: a process of its own, with its own `DAGSTER_HOME`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest


def run_cli(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`mirror-pipeline ARGS` with `DAGSTER_HOME=home`; its exit code and output, never raising on failure."""
    return subprocess.run(
        [sys.executable, "-m", "mirror_pipeline", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=timeout,
    )


def stoppable_with_ctrl_c() -> None:
    """`preexec_fn` for a child a test stops with SIGINT, as a user's Ctrl-C.

    A shell's background job (`make test &` in a script) starts with SIGINT
    ignored, its children inherit that, and Python then installs no
    KeyboardInterrupt handler: the child would never stop. The child gets the
    default disposition back, so Python installs its handler as in a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class UiProcess:
    """`mirror-pipeline ui` as a user runs it; its output is kept in `log`."""

    def __init__(self, config: Path, home: Path, port: int, log: Path):
        self.log = log
        self.lines: list[str] = []
        env = {**os.environ, "DAGSTER_HOME": str(home)}
        env.pop("MIRROR_PIPELINE_CONFIG", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mirror_pipeline", "ui", "--config", str(config), "--port", str(port)],
            cwd=config.parent,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            preexec_fn=stoppable_with_ctrl_c,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with open(self.log, "w") as out:
            for line in self.proc.stdout:
                self.lines.append(line)
                out.write(line)
                out.flush()

    def wait_until_serving(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.match(r"Dagster UI: (http://\S+)", line)
                if found:
                    return found.group(1)
            if self.proc.poll() is not None:
                self.reader.join(5)
                pytest.fail(f"mirror-pipeline ui exited with {self.proc.returncode}:\n{''.join(self.lines)[-3000:]}")
            time.sleep(0.5)
        pytest.fail(f"mirror-pipeline ui did not serve within {timeout_s} s; see {self.log}")

    def stop(self, timeout_s: float) -> tuple[int, str]:
        """Ctrl-C, as a user stops it; killed if it does not stop in time. Safe to call twice."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # its children get SIGINT from the kernel (PR_SET_PDEATHSIG)
                self.proc.wait(30)
        self.reader.join(10)
        return self.proc.returncode, "".join(self.lines)
