"""The lifecycle vocabulary: which moves are allowed, and when a copy task may write (R-LC-1, R-LC-3, R-LC-8)."""

from __future__ import annotations

import pytest

from mirror_pipeline.model.errors import MirrorRefused
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import (
    ACTIVE,
    FOREIGN_WRITE,
    PAUSED,
    PENDING_STOPPED,
    SOURCE_UNAVAILABLE,
    STATES,
    STOPPED,
    STOPPING,
    may_copy,
    transition,
    with_flag,
)


def mirror(state: str = ACTIVE, flags: tuple = ()) -> MirrorInfo:
    return MirrorInfo("l", "t", "t", state, 0.0, "created", 0.0, flags=flags)


@pytest.mark.parametrize("state", [ACTIVE, PENDING_STOPPED, SOURCE_UNAVAILABLE])
def test_a_task_may_copy_only_in_copying_states_without_a_refusing_flag(state):
    assert may_copy(mirror(state))
    assert not may_copy(mirror(state, flags=(STOPPING,)))
    assert not may_copy(mirror(state, flags=(FOREIGN_WRITE,)))


@pytest.mark.parametrize("state", sorted(set(STATES) - {ACTIVE, PENDING_STOPPED, SOURCE_UNAVAILABLE}))
def test_no_task_copies_into_a_paused_stopped_or_failed_mirror(state):
    assert not may_copy(mirror(state))


def test_a_deleted_mirror_is_not_copied_to():
    assert not may_copy(None)


@pytest.mark.parametrize("to", STATES)
def test_a_stopped_mirror_never_moves_again(to):
    with pytest.raises(MirrorRefused, match="is STOPPED"):
        transition(mirror(STOPPED), to, "a late cycle")


def test_a_transition_records_its_history_and_keeps_flags():
    after = transition(mirror(ACTIVE, flags=(STOPPING,)), PAUSED, "operator")
    assert (after.state, after.reason, after.flags) == (PAUSED, "operator", (STOPPING,))
    assert after.history[-1][1:] == (ACTIVE, PAUSED, "operator")


def test_flags_are_set_once_and_cleared():
    flagged = with_flag(with_flag(mirror(), STOPPING), STOPPING)
    assert flagged.flags == (STOPPING,)
    assert with_flag(flagged, STOPPING, present=False).flags == ()
