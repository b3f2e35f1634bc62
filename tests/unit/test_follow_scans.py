"""Follow mode scans auto-create once per epoch (before planning it, continued or in full), and not
again in its first when the CLI has just scanned."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from mirror_pipeline.model.results import CycleResult
from mirror_pipeline.operations import follow as following
from mirror_pipeline.replication import epochs
from mirror_pipeline.replication.planner import Plan


class _NoSyncs:
    def __init__(self, *args):
        pass

    start = join = lambda self: None


class _Report:
    def epoch(self, epoch) -> None:
        pass

    def synced(self, kind, result, error) -> None:
        pass


@pytest.fixture
def follow_epochs(monkeypatch):
    """Runs follow mode for three epochs on a link with auto-create on; returns the epochs that scanned.

    Epoch 1 is planned in full, the next ones continue the one before while it copies.
    """
    scanned_in: list[int] = []
    planned = {"n": 0}
    stop = threading.Event()

    def scan(ctx):
        scanned_in.append(planned["n"] + 1)
        return SimpleNamespace(errors={})

    def epoch(number: int) -> epochs.RunningEpoch:
        planned["n"] = number
        if number == 3:
            stop.set()
        job: Future = Future()
        job.set_result([])
        return epochs.RunningEpoch(number, Plan(), 0.0, time.time() + 0.05, job)

    def finish(ctx, running, handed_over):
        return CycleResult("l", 0.0, 0.0, work_units=1)

    monkeypatch.setattr(following.auto_create, "scan", scan)
    monkeypatch.setattr(following.epochs, "start", lambda ctx, spark, jobs, number, *_: epoch(number))
    monkeypatch.setattr(
        following.epochs, "continue_from", lambda ctx, spark, jobs, running, *_: epoch(running.number + 1)
    )
    monkeypatch.setattr(following.epochs, "offset_map_end", lambda ctx: 0)
    monkeypatch.setattr(following.epochs, "finish", finish)
    monkeypatch.setattr(following, "_SideSyncs", _NoSyncs)
    link = SimpleNamespace(auto_create_enable=True, heartbeats_enabled=False)
    ctx = SimpleNamespace(link=link, check_destination=lambda: None, check_source=lambda: None)

    def run(scanned: bool) -> list[int]:
        assert following.follow(lambda: ctx, None, _Report(), stop, epoch_s=0.1, scanned=scanned) == 3
        return scanned_in

    return run


def test_every_epoch_scans_when_nobody_scanned_before(follow_epochs):
    assert follow_epochs(scanned=False) == [1, 2, 3]


def test_the_first_epoch_does_not_scan_again_after_the_cli_scanned(follow_epochs):
    assert follow_epochs(scanned=True) == [2, 3]
