"""Pure parts of the deployment's self-healing: which run workers count as alive, and the restart backoff."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from mirror_pipeline.cli.ui_processes import FIRST_BACKOFF_S, MAX_BACKOFF_S, backoff_s, how_it_ended
from mirror_pipeline_dagster.run_launcher import HOST_TAG, PID_TAG, in_process_run_tags, process_alive, run_worker


class _Run:
    def __init__(self, tags: dict):
        self.tags, self.run_id = tags, "r1"


class _Record:
    class create_timestamp:  # noqa: N801 - the attribute Dagster's run record has
        @staticmethod
        def timestamp() -> float:
            return 1000.0


class _Instance:
    def get_run_record_by_id(self, run_id):
        return _Record()


def test_this_process_is_alive_and_a_reused_id_is_not():
    assert process_alive(os.getpid(), started_by=time.time())
    # Reported before this process started: the id belongs to a later process, the reported one is gone.
    assert not process_alive(os.getpid(), started_by=0.0)


def test_an_ended_process_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid, started_by=time.time())
    assert not process_alive(-1, started_by=time.time())


def test_an_in_process_run_is_found_by_its_tags_on_this_host_only():
    tags = in_process_run_tags()
    assert tags == {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    assert run_worker(_Instance(), _Run(tags)) == (os.getpid(), 1000.0)
    elsewhere = run_worker(_Instance(), _Run({**tags, HOST_TAG: "another-host"}))
    assert elsewhere == "the run's process is on host 'another-host', not this one"  # counts as running


def test_a_run_on_a_code_server_elsewhere_counts_as_running():
    remote = {"dagster/grpc_info": '{"host": "code.example", "port": 4000}'}
    assert run_worker(_Instance(), _Run(remote)) == "the run's code server is not on this host"


def test_restarts_back_off_to_a_minute():
    assert [backoff_s(n) for n in (1, 2, 3, 4)] == [
        FIRST_BACKOFF_S,
        2 * FIRST_BACKOFF_S,
        4 * FIRST_BACKOFF_S,
        8 * FIRST_BACKOFF_S,
    ]
    assert backoff_s(30) == MAX_BACKOFF_S
    assert how_it_ended(-9) == "was killed by signal 9" and how_it_ended(3) == "exited with code 3"
