"""All-or-nothing lifecycle verbs (issue #31): what each verb requires of a mirror, the refusal naming
every mirror that cannot go, and the report of a verb that failed part-way. Pure: no Kafka."""

from __future__ import annotations

import pytest

from mirror_pipeline.cli.lifecycle import _render
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorRefused
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.operations.all_or_nothing import (
    Incomplete,
    LifecycleResult,
    check_request,
    one_by_one,
    why_not,
)
from tests.config_files import write_pair_config

LINK = "west-to-east"
AUTO = {
    "auto.create.mirror.topics.enable": True,
    "auto.create.mirror.topics.filters": {
        "topicFilters": [{"name": "orders", "patternType": "PREFIXED", "filterType": "INCLUDE"}]
    },
}


@pytest.fixture
def link(tmp_path):
    return load_config(write_pair_config(tmp_path / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:2", LINK)).link(LINK)


@pytest.fixture
def auto_link(tmp_path):
    path = write_pair_config(tmp_path / "auto.yaml", "127.0.0.1:1", "127.0.0.1:2", LINK, link_settings=AUTO)
    return load_config(path).link(LINK)


def mirror(name: str, state: str = "ACTIVE", *flags: str, source: str = "") -> MirrorInfo:
    return MirrorInfo(LINK, name, source or name, state, 0.0, "", 0.0, flags=tuple(flags))


@pytest.mark.parametrize(
    ("verb", "goes", "refused"),
    [
        ("pause", ["ACTIVE", "SOURCE_UNAVAILABLE", "PAUSED"], ["PENDING_STOPPED", "STOPPED", "LINK_FAILED", "FAILED"]),
        ("resume", ["PAUSED", "ACTIVE", "SOURCE_UNAVAILABLE", "PENDING_STOPPED"], ["STOPPED", "LINK_FAILED", "FAILED"]),
        (
            "promote",
            ["ACTIVE", "PAUSED", "PENDING_STOPPED", "SOURCE_UNAVAILABLE", "STOPPED"],
            ["LINK_FAILED", "FAILED"],
        ),
        (
            "failover",
            ["ACTIVE", "PAUSED", "PENDING_STOPPED", "SOURCE_UNAVAILABLE", "STOPPED", "LINK_FAILED", "FAILED"],
            [],
        ),
        (
            "delete",
            ["ACTIVE", "PAUSED", "PENDING_STOPPED", "SOURCE_UNAVAILABLE", "STOPPED", "LINK_FAILED", "FAILED"],
            [],
        ),
        ("reverse", ["STOPPED"], ["ACTIVE", "PAUSED", "FAILED"]),
    ],
)
def test_the_states_each_verb_takes(link, verb, goes, refused):
    assert [s for s in goes if why_not(verb, mirror("m", s), link)] == []
    assert [s for s in refused if not why_not(verb, mirror("m", s), link)] == []


def test_the_reasons_name_the_mirror_and_what_to_do(link, auto_link):
    assert why_not("pause", mirror("m", "FAILED"), link) == "mirror 'm' is FAILED (only an ACTIVE mirror can be paused)"
    assert (
        why_not("resume", mirror("m", "STOPPED"), link) == "mirror 'm' is STOPPED (only a PAUSED mirror can be resumed)"
    )
    assert why_not("promote", mirror("m", "ACTIVE", "STOPPING"), link) == (
        "mirror 'm' is being stopped by a failover that did not finish (run failover again to finish it)"
    )
    assert why_not("promote", mirror("m", "ACTIVE", "FOREIGN_WRITE"), link) == (
        "mirror 'm' holds records the link did not write (promote cannot verify it; failover can stop it)"
    )
    for verb, then in (("failover", "promote or fail it over"), ("delete", "delete it")):
        assert why_not(verb, mirror("m", "PAUSED", "REVERSING"), link) == (
            f"mirror 'm' is being set up by a reverse that did not finish (run reverse again to finish it, then {then})"
        )
    assert why_not("pause", mirror("m", "PAUSED", "REVERSING"), link) is None  # a pause or resume never was refused
    assert why_not("delete", mirror("orders-1"), auto_link) == (
        "mirror 'orders-1' would be created again by auto-create: the link's auto.create.mirror.topics.filters still "
        "select its source topic 'orders-1'"
    )
    # A FAILED or STOPPED mirror may go though the filters select it; a source they do not select may go.
    assert [
        why_not("delete", m, auto_link)
        for m in (mirror("orders-2", "FAILED"), mirror("orders-3", "STOPPED"), mirror("payments"))
    ] == [None, None, None]


def test_a_request_is_refused_naming_every_mirror_that_cannot_go(link):
    registry = {m.mirror_topic: m for m in (mirror("a"), mirror("b", "STOPPED"), mirror("c", "FAILED"))}

    with pytest.raises(MirrorRefused) as refused:
        check_request("pause", link, registry, ["a", "b", "x", "c", "y"])

    assert str(refused.value) == (
        "pause refused: no mirror 'x', 'y' on link 'west-to-east' (its mirrors: a, b, c); mirror 'b' is STOPPED "
        "(only an ACTIVE mirror can be paused); mirror 'c' is FAILED (only an ACTIVE mirror can be paused); "
        "nothing was changed"
    )
    assert check_request("pause", link, registry, ["a", "a"]) == [registry["a"]]


def test_a_refusal_on_a_wide_link_names_ten_of_its_mirrors_and_counts_the_rest(link):
    registry = {m.mirror_topic: m for m in (mirror(f"t{i:04d}") for i in range(1000))}

    with pytest.raises(MirrorRefused) as refused:
        check_request("pause", link, registry, ["nosuch"])

    assert str(refused.value) == (
        "pause refused: no mirror 'nosuch' on link 'west-to-east' (its mirrors: t0000, t0001, t0002, t0003, t0004, "
        "t0005, t0006, t0007, t0008, t0009 and 990 more); nothing was changed"
    )


def test_the_ways_out_of_an_auto_create_refusal_are_said_once(auto_link):
    registry = {m.mirror_topic: m for m in (mirror("orders-1"), mirror("orders-2"), mirror("payments"))}

    with pytest.raises(MirrorRefused) as refused:
        check_request("delete", auto_link, registry, ["orders-1", "payments", "orders-2"])

    assert str(refused.value) == (
        "delete refused: mirror 'orders-1' would be created again by auto-create: the link's "
        "auto.create.mirror.topics.filters still select its source topic 'orders-1'; mirror 'orders-2' would be "
        "created again by auto-create: the link's auto.create.mirror.topics.filters still select its source topic "
        "'orders-2'; to delete such a mirror, delete the source topic first (and wait for the mirror to be FAILED), "
        "exclude it with an EXCLUDE filter, or turn auto.create.mirror.topics.enable off; nothing was changed"
    )


def test_every_mirror_of_the_link_leaves_the_stopped_ones_to_a_pause_or_resume_only(link):
    registry = {m.mirror_topic: m for m in (mirror("b", "PAUSED"), mirror("a", "STOPPED"))}

    assert [m.mirror_topic for m in check_request("resume", link, registry, None)] == ["a", "b"]
    with pytest.raises(MirrorRefused, match="mirror 'a' is STOPPED"):
        check_request("resume", link, registry, ["a", "b"])  # named, it cannot go
    with pytest.raises(MirrorRefused, match="mirror 'b' is PAUSED on link 'west-to-east': promote or fail it over"):
        check_request("reverse", link, registry, None)


def test_a_verb_that_fails_part_way_stops_and_says_what_changed():
    infos = [mirror("a"), mirror("b"), mirror("c"), mirror("d")]
    result = LifecycleResult("delete", LINK)
    acted = []

    def act(info, changed):
        acted.append(info.mirror_topic)
        if info.mirror_topic == "a":
            result.add(info, mirror("a", "DELETED"), "deleted")
        elif info.mirror_topic == "b":
            result.add(info, info, "already gone")
        else:
            changed.append("it is marked DELETING")
            raise ClusterUnreachable("cluster 'us-east' did not answer")

    with pytest.raises(Incomplete) as incomplete:
        one_by_one(result, infos, act)

    assert acted == ["a", "b", "c"]  # 'd' was not attempted
    assert str(incomplete.value) == (
        "delete did not finish on link 'west-to-east': deleted: a; unchanged: b (already gone); not deleted: "
        "c (cluster 'us-east' did not answer; it is marked DELETING), d (not attempted)"
    )
    assert incomplete.value.result is result
    assert result.to_dict()["not_done"] == {
        "c": {"state": "ACTIVE", "why": "cluster 'us-east' did not answer; it is marked DELETING"},
        "d": {"state": "ACTIVE", "why": "not attempted"},
    }
    assert isinstance(incomplete.value.__cause__, ClusterUnreachable)


def test_a_failure_after_the_change_counts_the_mirror_as_changed():
    result = LifecycleResult("pause", LINK)

    def act(info, changed):
        result.add(info, mirror(info.mirror_topic, "PAUSED"), "paused: copies nothing until resumed")
        raise KeyError("partition 0")  # not an engine error: its type is named

    with pytest.raises(Incomplete) as incomplete:
        one_by_one(result, [mirror("a"), mirror("b")], act)

    assert str(incomplete.value) == (
        "pause did not finish on link 'west-to-east': paused: a (then: KeyError: "
        "'partition 0'); not paused: b (not attempted)"
    )
    assert _render(result.to_dict()).splitlines() == [
        "MIRROR  BEFORE  AFTER   WHAT HAPPENED",
        "a       ACTIVE  PAUSED  paused: copies nothing until resumed; then: KeyError: 'partition 0'",
        "b       ACTIVE  ACTIVE  not paused: not attempted",
    ]


def test_a_verb_that_finished_reports_as_before():
    result = LifecycleResult("pause", LINK)
    assert one_by_one(result, [mirror("a")], lambda info, changed: result.add(info, info, "already paused")) is result
    assert result.to_dict() == {
        "verb": "pause",
        "link": LINK,
        "mirrors": {"a": {"before": "ACTIVE", "after": "ACTIVE", "said": "already paused"}},
    }
