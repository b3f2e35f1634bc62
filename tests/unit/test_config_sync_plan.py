"""`plan_config_changes`: what a config sync changes, keeps and holds back (R-CS-1..3, R-CS-5)."""

from __future__ import annotations

from mirror_pipeline.kafka.topic_configs import LONG_MAX
from mirror_pipeline.sync.config_sync import ConfigPlan, plan_config_changes

# Effective configs of a fresh topic on a Kafka 4 broker (the subset that matters here).
DEFAULTS = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "max.message.bytes": "1048588",
    "compression.type": "producer",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.after.max.ms": "3600000",
    "flush.messages": LONG_MAX,
    "min.cleanable.dirty.ratio": "0.5",
    "segment.index.bytes": "10485760",
    "min.insync.replicas": "1",
    "segment.ms": "604800000",
}
# A mirror as create_mirror leaves it: the source's values, bounds wide open.
MIRROR = {**DEFAULTS, "message.timestamp.after.max.ms": LONG_MAX}


def src(**changes: str) -> dict:
    return {**DEFAULTS, **{k.replace("_", "."): v for k, v in changes.items()}}


def mir(**changes: str) -> dict:
    return {**MIRROR, **{k.replace("_", "."): v for k, v in changes.items()}}


def test_a_fresh_mirror_is_in_sync_and_reports_the_held_back_bound() -> None:
    plan = plan_config_changes(DEFAULTS, MIRROR, {})
    assert plan.in_sync and plan.changes == {} and plan.overridden == {}
    # The source's 1 h bound is not the mirror's (Long.MAX): held back, reported.
    assert plan.held_back == {"message.timestamp.after.max.ms": "3600000"}


def test_always_synced_configs_follow_the_source() -> None:
    plan = plan_config_changes(src(retention_ms="1000", cleanup_policy="compact"), MIRROR, {})
    assert plan.changes == {
        "retention.ms": ("604800000", "1000"),
        "cleanup.policy": ("delete", "compact"),
    }
    assert not plan.in_sync
    assert plan.applied["retention.ms"] == "1000"


def test_always_synced_source_wins_over_a_mirror_change_even_when_the_source_is_at_default() -> None:
    # Somebody set the mirror's retention; the source has the broker default.
    plan = plan_config_changes(DEFAULTS, mir(retention_ms="5"), {"retention.ms": "604800000"})
    assert plan.changes == {"retention.ms": ("5", "604800000")}
    assert plan.overridden == {}


def test_overridable_follows_the_source_when_the_mirror_has_what_the_link_applied() -> None:
    last = {"flush.messages": LONG_MAX}
    plan = plan_config_changes(src(flush_messages="5000"), MIRROR, last)
    assert plan.changes == {"flush.messages": (LONG_MAX, "5000")}
    assert plan.applied["flush.messages"] == "5000"


def test_overridable_follows_the_source_before_the_first_sync() -> None:
    # No record yet: the mirror's values are the ones it got at creation.
    plan = plan_config_changes(src(flush_messages="5000"), MIRROR, {})
    assert plan.changes == {"flush.messages": (LONG_MAX, "5000")}


def test_an_operator_override_is_kept_and_reported() -> None:
    last = {"min.cleanable.dirty.ratio": "0.5"}
    plan = plan_config_changes(src(min_cleanable_dirty_ratio="0.3"), mir(min_cleanable_dirty_ratio="0.9"), last)
    assert plan.changes == {}
    assert plan.in_sync
    assert plan.overridden == {"min.cleanable.dirty.ratio": "0.9"}
    # Still remembers what the link applied, so the override stays recognisable.
    assert plan.applied["min.cleanable.dirty.ratio"] == "0.5"


def test_an_override_that_equals_the_source_is_no_override() -> None:
    last = {"min.cleanable.dirty.ratio": "0.5"}
    plan = plan_config_changes(src(min_cleanable_dirty_ratio="0.9"), mir(min_cleanable_dirty_ratio="0.9"), last)
    assert plan.changes == {} and plan.overridden == {}
    assert plan.applied["min.cleanable.dirty.ratio"] == "0.9"


def test_values_of_an_unrecorded_alter_are_the_links_own() -> None:
    # The link set 0.7 but died before recording it; the source has moved on to 0.6.
    plan = plan_config_changes(
        src(min_cleanable_dirty_ratio="0.6"),
        mir(min_cleanable_dirty_ratio="0.7"),
        {"min.cleanable.dirty.ratio": "0.5"},
        pending={"min.cleanable.dirty.ratio": "0.7"},
    )
    assert plan.changes == {"min.cleanable.dirty.ratio": ("0.7", "0.6")}
    assert plan.overridden == {}


def test_never_synced_configs_are_left_alone() -> None:
    plan = plan_config_changes(src(min_insync_replicas="2", segment_ms="1000"), MIRROR, {})
    assert plan.changes == {}
    assert "min.insync.replicas" not in plan.applied and "segment.ms" not in plan.applied


def test_log_append_time_is_held_back_and_the_mirror_keeps_create_time() -> None:
    plan = plan_config_changes(src(message_timestamp_type="LogAppendTime"), MIRROR, {})
    assert plan.changes == {}
    assert plan.held_back["message.timestamp.type"] == "LogAppendTime"
    # A mirror that somehow got LogAppendTime is put back to CreateTime.
    plan = plan_config_changes(DEFAULTS, mir(message_timestamp_type="LogAppendTime"), {})
    assert plan.changes == {"message.timestamp.type": ("LogAppendTime", "CreateTime")}


def test_timestamp_bounds_stay_wide_open_on_the_mirror() -> None:
    plan = plan_config_changes(src(message_timestamp_before_max_ms="1000"), MIRROR, {})
    assert plan.changes == {}
    assert plan.held_back == {"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "3600000"}
    plan = plan_config_changes(DEFAULTS, mir(message_timestamp_before_max_ms="1000"), {})
    assert plan.changes == {"message.timestamp.before.max.ms": ("1000", LONG_MAX)}


def test_the_removed_difference_bound_is_never_set() -> None:
    # Kafka 3.x still reports it; the mirror keeps whatever it has.
    name = "message.timestamp.difference.max.ms"
    plan = plan_config_changes({**DEFAULTS, name: "1000"}, {**MIRROR, name: LONG_MAX}, {})
    assert name not in plan.changes
    assert plan.held_back[name] == "1000"
    plan = plan_config_changes({**DEFAULTS, name: LONG_MAX}, {**MIRROR, name: LONG_MAX}, {})
    assert name not in plan.held_back


def test_configs_one_side_does_not_report_are_skipped() -> None:
    source = {k: v for k, v in src(retention_ms="1").items() if k != "compression.type"}
    mirror = {k: v for k, v in mir(compression_type="gzip").items() if k != "retention.ms"}
    plan = plan_config_changes(source, mirror, {})
    assert plan.changes == {}


def test_plan_to_dict() -> None:
    plan = plan_config_changes(src(retention_ms="1"), MIRROR, {})
    d = plan.to_dict()
    assert d["changes"] == {"retention.ms": ["604800000", "1"]}
    assert d["in_sync"] is False
    assert isinstance(plan, ConfigPlan)
