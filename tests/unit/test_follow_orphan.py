"""Follow mode started by a Dagster run stops by itself when the run worker that started it is gone."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

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


def test_the_watch_stops_follow_mode_once_its_parent_dies(tmp_path: Path):
    result = tmp_path / "result"
    subprocess.run([sys.executable, "-c", _SCRIPT, str(result)], check=True, timeout=60)
    deadline = time.monotonic() + 30
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert result.read_text() == "stopped"


def test_the_watch_leaves_follow_mode_alone_while_its_parent_lives():
    stop = threading.Event()
    _stop_when_orphaned(stop, every_s=0.01)
    assert not stop.wait(0.3)
    stop.set()  # ends the watch
