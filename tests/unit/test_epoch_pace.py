"""Follow mode times its epochs from how their copy tasks started (`replication.epoch_pace`)."""

from __future__ import annotations

import logging
from concurrent.futures import Future

import pytest

from mirror_pipeline.replication import epochs
from mirror_pipeline.replication.copier import UnitResult
from mirror_pipeline.replication.epoch_pace import (
    HAND_OVER_LEAD_S,
    LATE_FACTOR,
    LATENESS_EPOCHS,
    WAITING_MIRRORS_EPOCH_S,
    EpochPace,
)
from mirror_pipeline.replication.hand_over import late_margin_s
from mirror_pipeline.replication.planner import Plan

T0 = 1_000_000.0


def test_tasks_on_time_keep_the_epochs_asked_for_and_the_least_lead():
    pace = EpochPace(3.0)
    pace.ended(submitted=T0 - 1.5, starts_at=T0, last_ready_at=T0 - 0.9)
    pace.planned(0.1)
    assert (pace.length_s, pace.lead_s) == (3.0, HAND_OVER_LEAD_S)
    assert pace.plan_next_at(T0 + 3.0) == T0 + 1.5  # the lead, at most half an epoch


@pytest.mark.parametrize("late_s", [1.0, 9.0, 33.0])
def test_an_epoch_lasts_long_enough_for_tasks_as_late_as_the_last(late_s):
    """A task as late as the last ones would no longer leave its partitions (`hand_over.wait_for_start`)."""
    pace = EpochPace(2.0)
    pace.ended(submitted=T0, starts_at=T0, last_ready_at=T0 + late_s)  # a first epoch: it fences at once
    assert pace.length_s == max(2.0, LATE_FACTOR * late_s)
    assert late_s < pace.length_s - late_margin_s(pace.length_s)


def test_the_next_epoch_starts_as_long_before_its_hand_over_as_tasks_took_to_be_ready():
    pace = EpochPace(2.0)
    pace.ended(submitted=T0, starts_at=T0, last_ready_at=T0 + 12.0)
    pace.planned(0.5)
    assert pace.lead_s == 2 * 0.5 + 12.0
    ends_at = T0 + 100.0
    assert pace.plan_next_at(ends_at) == ends_at - 12.0  # capped at half the 24 s epoch


def test_epochs_are_back_to_the_length_asked_for_once_tasks_were_in_time_for_a_while(caplog):
    pace = EpochPace(2.0)
    pace.ended(submitted=T0, starts_at=T0, last_ready_at=T0 + 10.0)
    pace.ended(submitted=T0, starts_at=T0, last_ready_at=T0 + 4.0)  # the worst of the latest counts
    lengths = []
    for _ in range(LATENESS_EPOCHS):
        pace.ended(submitted=T0 - 3.0, starts_at=T0, last_ready_at=T0 - 2.0)  # ready before the hand-over
        lengths.append(pace.length_s)
    assert lengths == [20.0] * (LATENESS_EPOCHS - 2) + [8.0, 2.0]
    # Said when they grew and when they were back, not at every step between.
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "follow: copy tasks were ready 10.0 s after their epoch's start, too late for 2 s epochs: "
        "epochs last 20 s until tasks start in time",
        "follow: copy tasks start in time again: epochs last 2 s",
    ]


def test_an_epoch_whose_tasks_never_got_ready_changes_nothing():
    pace = EpochPace(2.0)
    pace.ended(submitted=T0, starts_at=T0, last_ready_at=T0 + 5.0)
    before = (pace.length_s, list(pace.lateness_s), pace.tasks_ready_s)
    pace.ended(submitted=T0, starts_at=T0, last_ready_at=None)
    assert (pace.length_s, list(pace.lateness_s), pace.tasks_ready_s) == before


def _epoch(results: list[UnitResult] | Exception) -> epochs.RunningEpoch:
    job: Future = Future()
    if isinstance(results, Exception):
        job.set_exception(results)
    else:
        job.set_result(results)
    return epochs.RunningEpoch(1, Plan(), T0, T0 + 3.0, job, T0, T0)


def _result(ready_at: float) -> UnitResult:
    return UnitResult("m", 0, 0, 0, 0, 0, ready_at=ready_at)


def test_an_epoch_was_ready_when_its_last_task_was():
    assert epochs.last_ready_at(_epoch([_result(T0 + 1.0), _result(T0 + 4.5), _result(0.0)])) == T0 + 4.5
    assert epochs.last_ready_at(_epoch([_result(0.0)])) is None  # no task got that far
    assert epochs.last_ready_at(_epoch(RuntimeError("tasks lost"))) is None


def test_an_epoch_that_left_out_mirrors_not_listed_yet_is_short_but_long_enough_for_late_tasks():
    assert EpochPace(120.0).waiting_length_s == WAITING_MIRRORS_EPOCH_S
    assert EpochPace(5.0).waiting_length_s == 5.0  # never longer than the epochs asked for
    pace = EpochPace(120.0)
    pace.ended(submitted=T0, starts_at=T0, last_ready_at=T0 + 15.0)
    assert pace.waiting_length_s == LATE_FACTOR * 15.0
    waiting, listed = Plan(not_listed_yet=["new-topic"]), Plan()
    assert epochs._length(waiting, 120.0, pace.waiting_length_s) == 30.0
    assert epochs._length(listed, 120.0, pace.waiting_length_s) == 120.0
    assert epochs._length(waiting, 120.0, None) == 120.0
