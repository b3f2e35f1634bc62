"""Follow mode started by a Dagster run stops by itself when the run worker that started it is gone."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mirror_pipeline.cli.follow import _stop_when_orphaned

# A parent that starts the watch in a forked child, then dies; the child writes whether its stop was set.
_SCRIPT = """
import os, sys, threading
from mirror_pipeline.cli.follow import _stop_when_orphaned
read_end, write_end = os.pipe()
if os.fork() == 0:
    stop = threading.Event()
    _stop_when_orphaned(stop, every_s=0.05)
    os.write(write_end, b"watching")
    stopped = stop.wait(20)
    open(sys.argv[1] + ".tmp", "w").write("stopped" if stopped else "still running")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    os._exit(0)
os.read(read_end, 8)
os._exit(0)
"""


# As the follow job starts it: the worker names itself; here it dies before the child's watch starts.
_EARLY_DEATH_SCRIPT = """
import os, sys, threading, time
from mirror_pipeline.cli.follow import _stop_when_orphaned
from mirror_pipeline.operations.follow import RUN_WORKER_PID_ENV
os.environ[RUN_WORKER_PID_ENV] = str(os.getpid())
if os.fork() == 0:
    parent = int(os.environ[RUN_WORKER_PID_ENV])
    while os.getppid() == parent:  # follow mode still starting Spark when its worker is killed
        time.sleep(0.01)
    stop = threading.Event()
    _stop_when_orphaned(stop, every_s=0.05)
    stopped = stop.wait(20)
    open(sys.argv[1] + ".tmp", "w").write("stopped" if stopped else "still running")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    os._exit(0)
os._exit(0)
"""


@pytest.mark.parametrize("script", [_SCRIPT, _EARLY_DEATH_SCRIPT], ids=["dies-while-watched", "dies-before-the-watch"])
def test_the_watch_stops_follow_mode_once_its_parent_dies(script: str, tmp_path: Path):
    result = tmp_path / "result"
    subprocess.run([sys.executable, "-c", script, str(result)], check=True, timeout=60)
    deadline = time.monotonic() + 30
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert result.read_text() == "stopped"


def test_the_watch_leaves_follow_mode_alone_while_its_parent_lives():
    stop = threading.Event()
    _stop_when_orphaned(stop, every_s=0.01)
    assert not stop.wait(0.3)
    stop.set()  # ends the watch
