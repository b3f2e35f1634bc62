"""Every mirror partition has its own writer identity: fencing one never fences another."""

from __future__ import annotations

from mirror_pipeline.link.state_store import state_writer_id, transactional_id


def test_names_with_dots_never_share_an_identity():
    assert transactional_id("a", "b.c", 0) != transactional_id("a.b", "c", 0)
    assert transactional_id("a", "b", 10) != transactional_id("a", "b.1", 0)


def test_segment_writers_and_the_state_writer_differ():
    assert transactional_id("l", "state", 0) != state_writer_id("l")
