"""The plan asks every planned mirror's `max.message.bytes` beside the log offsets; a mirror with
nothing to copy whose describe failed does not fail the plan (only the copied ones are asked again)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from mirror_pipeline.model.errors import TopicNotFound
from mirror_pipeline.replication import planner


def _answered(value=None, error: Exception | None = None) -> Future:
    done: Future = Future()
    if error is None:
        done.set_result(value)
    else:
        done.set_exception(error)
    return done


def test_the_limits_asked_beside_the_offsets_serve_the_copied_mirrors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "max_message_bytes_of", lambda ctx, topics: pytest.fail("asked twice"))
    asked = _answered({"orders": 2_000_000, "idle": 1_048_588})
    assert planner._max_message_bytes(None, asked, ["orders"])["orders"] == 2_000_000


def test_a_failed_ask_is_asked_again_of_the_copied_mirrors_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    again: list[list[str]] = []

    def ask(ctx, topics: list[str]) -> dict[str, int]:
        again.append(topics)
        return {t: 3_000_000 for t in topics}

    monkeypatch.setattr(planner, "max_message_bytes_of", ask)
    failed = _answered(error=TopicNotFound("cluster 'b': topic 'gone' does not exist"))
    assert planner._max_message_bytes(None, failed, ["orders"]) == {"orders": 3_000_000}
    assert again == [["orders"]]


def test_nothing_to_copy_needs_no_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "max_message_bytes_of", lambda ctx, topics: pytest.fail("asked"))
    failed = _answered(error=TopicNotFound("cluster 'b': topic 'gone' does not exist"))
    assert planner._max_message_bytes(None, failed, []) == {}
