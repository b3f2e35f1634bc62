"""Follow mode scans auto-create once per epoch, and not again in its first when the CLI has just scanned."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from mirror_pipeline.model.results import CycleResult
from mirror_pipeline.operations import follow as following


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
    """Runs follow mode for three epochs on a link with auto-create on; returns the epochs that scanned."""
    scanned_in: list[int] = []
    epochs = {"n": 0}
    stop = threading.Event()

    def scan(ctx):
        scanned_in.append(epochs["n"] + 1)

    def run_cycle(ctx, spark, mirrors, follow_s):
        epochs["n"] += 1
        if epochs["n"] == 3:
            stop.set()
        return CycleResult("l", 0.0, 0.0, work_units=1)

    monkeypatch.setattr(following.auto_create, "scan", scan)
    monkeypatch.setattr(following.cycle, "run_cycle", run_cycle)
    monkeypatch.setattr(following, "_SideSyncs", _NoSyncs)
    link = SimpleNamespace(auto_create_enable=True, heartbeats_enabled=False)
    ctx = SimpleNamespace(link=link, check_destination=lambda: None, check_source=lambda: None)

    def run(scanned: bool) -> list[int]:
        following.follow(lambda: ctx, None, _Report(), stop, epoch_s=1, scanned=scanned)
        return scanned_in

    return run


def test_every_epoch_scans_when_nobody_scanned_before(follow_epochs):
    assert follow_epochs(scanned=False) == [1, 2, 3]


def test_the_first_epoch_does_not_scan_again_after_the_cli_scanned(follow_epochs):
    assert follow_epochs(scanned=True) == [2, 3]
