"""Two processes of one link changing mirror records at the same moment (R-LC-8), on the real local pair.

A state change is a compare-and-set by fencing: the writer fenced in between
reads again and decides again. These tests make the interleavings certain.
"""

from __future__ import annotations

import dataclasses

import pytest

from mirror_pipeline import engine
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from tests.integration.conftest import LINK


class CommitRacedProducer:
    """A producer whose commit first lets `race` run: another writer of the link takes over right then."""

    def __init__(self, producer, race):
        self._producer, self._race = producer, race

    def commit_transaction(self, *args):
        self._race()
        return self._producer.commit_transaction(*args)

    def __getattr__(self, name):
        return getattr(self._producer, name)


@pytest.fixture
def two_mirrors(config, source_bootstrap, create_topic, unique_name):
    topics = create_topic(source_bootstrap, unique_name("first")), create_topic(source_bootstrap, unique_name("second"))
    for topic in topics:
        engine.create_mirror(config, LINK, topic)
    return topics


def reason(text: str):
    return lambda info: dataclasses.replace(info, reason=text)


def assert_both_landed(config, first: str, second: str) -> None:
    records = {m.mirror_topic: m for m in engine.list_mirrors(config, LINK)}
    assert records[first].reason == "changed by this one"
    assert records[second].reason == "changed by the other"


def test_a_writer_fenced_after_its_read_decides_again(config, two_mirrors):
    first, second = two_mirrors
    mine, theirs = LinkContext.open(config, LINK).store, LinkContext.open(config, LINK).store
    decided = []

    def decide(info):
        decided.append(info.state)
        if len(decided) == 2:  # fenced and read: another process of the link takes over and commits now
            theirs.update_mirror(second, reason("changed by the other"))
        return reason("changed by this one")(info)

    assert mine.update_mirror(first, decide).reason == "changed by this one"
    assert len(decided) == 3, "the fenced writer read again and decided again"
    assert_both_landed(config, first, second)


def test_a_writer_fenced_during_its_commit_decides_again(config, two_mirrors, monkeypatch):
    """The other writer takes over while this one commits: the commit fails fenced, and closing the
    fenced writer must not turn that into an error of its own."""
    first, second = two_mirrors
    mine, theirs = LinkContext.open(config, LINK).store, LinkContext.open(config, LINK).store
    make_producer, proxied, raced = kc.producer, [], []

    def race() -> None:
        if not raced:
            raced.append(theirs.update_mirror(second, reason("changed by the other")))

    def producer(conf):
        made = make_producer(conf)
        if proxied or "transactional.id" not in conf:
            return made
        proxied.append(conf["transactional.id"])  # only this writer's first producer
        return CommitRacedProducer(made, race)

    monkeypatch.setattr(kc, "producer", producer)
    assert mine.update_mirror(first, reason("changed by this one")).reason == "changed by this one"
    assert raced, "the other writer took over mid-commit"
    assert_both_landed(config, first, second)
