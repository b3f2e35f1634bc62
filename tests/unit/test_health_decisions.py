"""What the source's answers do to mirror states, decided without I/O (R-LC-5, R-MT-9)."""

from __future__ import annotations

from dataclasses import replace

from mirror_pipeline.link.health import reachability_changes, source_failure_changes
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import (
    ACTIVE,
    FAILED,
    FOREIGN_WRITE,
    LINK_FAILED,
    PAUSED,
    PENDING_STOPPED,
    SOURCE_UNAVAILABLE,
    STOPPED,
)

CLUSTER = "cluster-a"


def mirror(name: str, state: str = ACTIVE, **changes) -> MirrorInfo:
    info = MirrorInfo("l", name, name, state, 0.0, "created", 0.0, source_cluster_id=CLUSTER)
    return replace(info, **changes)


def states(changes) -> dict[str, str]:
    return {name: info.state for name, info in changes}


def test_no_answer_makes_only_active_mirrors_source_unavailable():
    current = {"a": mirror("a"), "p": mirror("p", PAUSED), "s": mirror("s", STOPPED)}
    changes = reachability_changes(current, current, "west", None, "did not answer within 10s")
    assert states(changes) == {"a": SOURCE_UNAVAILABLE}
    assert changes[0][1].reason == "did not answer within 10s"


def test_the_right_cluster_answering_again_brings_mirrors_back():
    current = {"u": mirror("u", SOURCE_UNAVAILABLE), "f": mirror("f", LINK_FAILED), "a": mirror("a")}
    assert states(reachability_changes(current, current, "west", CLUSTER)) == {"u": ACTIVE, "f": ACTIVE}


def test_another_cluster_answering_fails_the_link_never_copies():
    current = {"a": mirror("a"), "u": mirror("u", SOURCE_UNAVAILABLE), "p": mirror("p", PAUSED)}
    changes = reachability_changes(current, current, "west", "cluster-b")
    assert states(changes) == {"a": LINK_FAILED, "u": LINK_FAILED}
    assert "cluster-b" in changes[0][1].reason


def test_only_the_named_mirrors_are_decided():
    current = {"a": mirror("a"), "b": mirror("b")}
    assert states(reachability_changes(current, ["b"], "west", None, "down")) == {"b": SOURCE_UNAVAILABLE}


def test_a_missing_source_topic_is_noted_then_fails_the_mirror_after_the_retry_timeout():
    gone = {"a": "source topic 'a' no longer exists"}
    first = source_failure_changes({"a": mirror("a")}, ["a"], gone, {}, now=100.0, timeout_s=30)
    assert states(first) == {"a": ACTIVE} and first[0][1].failing_since == 100.0
    noted = {"a": first[0][1]}
    assert source_failure_changes(noted, ["a"], gone, {}, now=120.0, timeout_s=30) == []
    later = source_failure_changes(noted, ["a"], gone, {}, now=131.0, timeout_s=30)
    assert states(later) == {"a": FAILED}


def test_a_readable_source_clears_the_failure_and_foreign_records_flag_the_mirror():
    current = {"a": mirror("a", failing_since=5.0), "b": mirror("b")}
    changes = dict(source_failure_changes(current, ["a", "b"], {}, {"b": "holds 3 records"}, now=10.0, timeout_s=30))
    assert changes["a"].failing_since == 0.0 and changes["a"].state == ACTIVE
    assert FOREIGN_WRITE in changes["b"].flags and changes["b"].reason == "holds 3 records"


def test_a_mirror_paused_or_stopped_meanwhile_is_left_alone():
    current = {"p": mirror("p", PAUSED), "s": mirror("s", STOPPED)}
    failures = {"p": "gone", "s": "gone"}
    assert source_failure_changes(current, ["p", "s"], failures, {}, now=1e9, timeout_s=1) == []


def test_a_promoting_mirror_whose_source_fails_is_noted_never_failed():
    # The lifecycle has no PENDING_STOPPED -> FAILED: deciding one refused the whole cycle's state change.
    current = {"p": mirror("p", PENDING_STOPPED, failing_since=5.0)}
    assert source_failure_changes(current, ["p"], {"p": "cannot be read"}, {}, now=1e9, timeout_s=1) == []
    first = source_failure_changes(
        {"p": mirror("p", PENDING_STOPPED)}, ["p"], {"p": "cannot be read"}, {}, now=100.0, timeout_s=1
    )
    assert states(first) == {"p": PENDING_STOPPED} and first[0][1].failing_since == 100.0
