"""Heartbeats (R-OBS-3) without Kafka: settings, names, the rights they need, the sentence shown."""

from __future__ import annotations

from mirror_pipeline.config.loader import parse_config
from mirror_pipeline.config.replication_policy import DefaultReplicationPolicy, IdentityReplicationPolicy, LinkNaming
from mirror_pipeline.link.required_acls import link_acls
from mirror_pipeline.operations.heartbeats import HeartbeatStatus
from tests.unit.test_config import SRC, base, problem


def test_heartbeats_are_off_unless_asked_for():
    link = parse_config(base(), SRC, {}).link("l")
    assert (link.heartbeats_enabled, link.heartbeats_interval_s) == (False, 1)


def test_the_interval_is_a_whole_number_of_seconds_within_an_hour():
    assert "emit.heartbeats.interval.seconds" in problem(base(**{"emit.heartbeats.interval.seconds": 0}))
    assert "at most 3600" in problem(base(**{"emit.heartbeats.interval.seconds": 3601}))
    assert "emit.heartbeats.enabled" in problem(base(**{"emit.heartbeats.enabled": "yes please"}))


def test_each_source_has_its_own_heartbeats_mirror_under_every_policy():
    for policy in (LinkNaming, DefaultReplicationPolicy, IdentityReplicationPolicy):
        naming = policy("us-west", "us-east", ".")
        assert naming.internal_topic("heartbeats") == "_mirror-pipeline.heartbeats"
        assert naming.heartbeats_mirror_topic() == "us-west._mirror-pipeline.heartbeats"
    renamed = LinkNaming("us-west", "us-east", "_", internal_names={"heartbeats": "hb"})
    assert renamed.heartbeats_mirror_topic() == "us-west_hb"


def test_no_filter_mirrors_a_heartbeats_topic_or_its_mirrors():
    naming = LinkNaming("us-east", "eu", ".")
    for name in ("_mirror-pipeline.heartbeats", "us-west._mirror-pipeline.heartbeats", "heartbeats"):
        assert naming.is_internal(name), name
    assert not naming.is_internal("orders.heartbeats-report")


def test_the_source_principal_writes_only_the_heartbeats_topic_and_only_when_asked():
    naming = LinkNaming("a", "b", ".")
    off = link_acls("l", naming, ["orders"], [], [])
    assert all("WRITE" not in g["operations"] for g in off["source"])
    on = link_acls("l", naming, ["orders"], [], [], heartbeats=True)
    writes = [g for g in on["source"] if "WRITE" in g["operations"]]
    assert [(g["name"], g["pattern"]) for g in writes] == [("_mirror-pipeline.heartbeats", "literal")]
    assert "a._mirror-pipeline.heartbeats" in {g["name"] for g in on["destination"]}


def test_the_sentence_says_what_the_newest_mirrored_heartbeat_tells():
    off = HeartbeatStatus(False, "_hb", "a._hb", 1)
    assert off.sentence() == "off (emit.heartbeats.enabled)"
    none_yet = HeartbeatStatus(True, "_hb", "a._hb", 1)
    assert none_yet.sentence() == "none has reached 'a._hb' yet"
    seen = HeartbeatStatus(True, "_hb", "a._hb", 5, newest_emitted_ms=1_795_000_000_000, age_ms=2500)
    assert seen.sentence().startswith("the newest on 'a._hb' was written 2.5s ago (2026-")
    assert "one every 5s while following" in seen.sentence()


def test_two_links_that_would_share_a_heartbeats_mirror_are_refused_at_load():
    data = base(**{"emit.heartbeats.enabled": True})
    data["links"]["m"] = {"source": "a", "destination": "b", "emit.heartbeats.enabled": True}
    said = problem(data)
    assert "links 'l', 'm' would all mirror their heartbeats to 'a._mirror-pipeline.heartbeats' on cluster 'b'" in said
    assert "mirror.heartbeats.topic" in said
    # One of them named its own heartbeats topic, or kept heartbeats off: nothing shared.
    data["links"]["m"]["mirror.heartbeats.topic"] = "_hb-m"
    assert set(parse_config(data, SRC, {}).links) == {"l", "m"}
    data["links"]["m"] = {"source": "a", "destination": "b"}
    assert set(parse_config(data, SRC, {}).links) == {"l", "m"}
