"""The `mirror-pipeline` command line run as a user runs it: a process of its own, with its own `DAGSTER_HOME`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def run_cli(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`mirror-pipeline ARGS` with `DAGSTER_HOME=home`; its exit code and output, never raising on failure."""
    return subprocess.run([sys.executable, "-m", "mirror_pipeline", *args], capture_output=True, text=True,
                          env={**os.environ, "DAGSTER_HOME": str(home)}, timeout=timeout)


def stoppable_with_ctrl_c() -> None:
    """`preexec_fn` for a child a test stops with SIGINT, as a user's Ctrl-C.

    A shell's background job (`make test &` in a script) starts with SIGINT
    ignored, its children inherit that, and Python then installs no
    KeyboardInterrupt handler: the child would never stop. The child gets the
    default disposition back, so Python installs its handler as in a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
