"""The incremental reader of compacted internal topics, without Kafka.

`CompactedView` is pure bookkeeping; `read_compacted` is driven here against
an in-memory single-partition topic standing in for `topic_identity`,
`topic_end` and `read_topic`, so the tests see exactly which offsets each read
fetched.
"""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest

from mirror_pipeline.link import compacted_view as cv
from mirror_pipeline.link.compacted_view import CompactedView, read_compacted
from mirror_pipeline.model.errors import MirrorError

# --- the pure view -------------------------------------------------------------------------


def test_a_tail_merges_over_what_was_read():
    view = CompactedView()
    view.reset("id-1", 60.0)
    view.merge([("a", b"1", 0), ("b", b"1", 1)], 2, read_started=0.0)
    view.merge([("a", b"2", 2), ("c", b"1", 3)], 4, read_started=1.0)
    assert view.latest == {"a": b"2", "b": b"1", "c": b"1"}
    assert (view.end, view.records_read) == (4, 4)


def test_a_tombstone_removes_its_key_and_a_later_value_brings_it_back():
    view = CompactedView()
    view.reset("id-1", 60.0)
    view.merge([("a", b"1", 0), ("b", b"1", 1), ("a", None, 2)], 3, read_started=0.0)
    assert view.latest == {"b": b"1"}
    view.merge([("b", None, 3), ("gone", None, 4), ("a", b"3", 5)], 6, read_started=1.0)
    assert view.latest == {"a": b"3"}


def test_the_same_records_merged_twice_give_the_same_view():
    once, twice = CompactedView(), CompactedView()
    records = [("a", b"1", 0), ("a", None, 1), ("b", b"1", 2), ("a", b"2", 3)]
    once.merge(records, 4, 0.0)
    twice.merge(records[:3], 3, 0.0)
    twice.merge(records, 4, 0.0)
    assert once.latest == twice.latest


@pytest.mark.parametrize(
    "topic_id, end, now, continues",
    [
        ("id-1", 10, 5.0, True),  # same topic, same end: nothing to read
        ("id-1", 12, 5.0, True),  # grown: read the tail
        ("id-1", 9, 5.0, False),  # shrunk: another topic of the same name
        ("id-2", 10, 5.0, False),  # another topic id: recreated, even with an end as far
        ("id-1", 10, 61.0, False),  # not read for longer than a tombstone is kept for sure
    ],
)
def test_a_view_continues_only_on_the_same_topic_not_gone_back_and_read_recently(topic_id, end, now, continues):
    view = CompactedView()
    view.reset("id-1", 60.0)
    view.merge([("k", b"v", 9)], 10, read_started=0.0)
    assert view.continues(topic_id, end, now) is continues


def test_a_new_or_reset_view_never_continues():
    assert not CompactedView().continues("id-1", 0, 0.0)
    view = CompactedView()
    view.reset("id-1", 60.0)
    view.merge([("k", b"v", 0)], 1, 0.0)
    view.reset("id-1", 60.0)
    assert (view.latest, view.end) == ({}, 0)
    assert not view.continues("id-1", 1, 0.0)  # reset forgets when it was read: the next read starts at 0


# --- read_compacted over an in-memory topic ------------------------------------------------


class FakeTopic:
    """One partition: its records, its id, and the offsets each read asked for."""

    def __init__(self):
        self.records: list[tuple[str, bytes | None]] = []
        self.topic_id: str | None = "id-1"
        self.reads: list[tuple[int, int]] = []
        self.on_read = None  # called once a read started (to recreate the topic under it)
        self.retention_ms = "86400000"

    def put(self, key: str, value: bytes | None) -> None:
        self.records.append((key, value))

    def recreate(self) -> None:
        self.records, self.topic_id = [], uuid.uuid4().hex

    def full(self) -> dict[str, bytes]:
        latest: dict[str, bytes] = {}
        for key, value in self.records:
            if value is None:
                latest.pop(key, None)
            else:
                latest[key] = value
        return latest


@pytest.fixture
def topic(monkeypatch) -> FakeTopic:
    fake = FakeTopic()

    def read_topic(_conf, _admin, _topic, _alias, start=0, end=None):
        fake.reads.append((start, end))
        if fake.on_read:
            hook, fake.on_read = fake.on_read, None
            hook()
        for offset in range(start, end):
            key, value = fake.records[offset]
            yield key, value, offset

    monkeypatch.setattr(cv, "topic_identity", lambda *_a: fake.topic_id)
    monkeypatch.setattr(cv, "topic_end", lambda *_a, **_kw: len(fake.records))
    monkeypatch.setattr(cv, "read_topic", read_topic)
    monkeypatch.setattr(cv, "describe_topic_configs", lambda *_a: {"delete.retention.ms": fake.retention_ms})
    cv.forget()
    yield fake
    cv.forget()


def read(cluster: str = "c1"):
    snapshot = read_compacted({}, None, "t", "east", cluster)
    return None if snapshot is None else (dict(snapshot.latest), snapshot.end)


def test_the_second_read_fetches_only_the_tail_and_equals_a_full_read(topic):
    for i in range(100):
        topic.put(f"k{i % 10}", b"%d" % i)
    assert read() == (topic.full(), 100)
    topic.put("k1", None)
    topic.put("k11", b"new")
    assert read() == (topic.full(), 102)
    assert read() == (topic.full(), 102)  # nothing new: no records fetched at all
    assert topic.reads == [(0, 100), (100, 102), (102, 102)]
    assert cv.view_of("c1", "t").records_read == 102


def test_a_recreated_topic_is_read_from_zero_even_when_it_is_as_long(topic):
    for i in range(5):
        topic.put(f"old{i}", b"x")
    read()
    topic.recreate()
    for i in range(7):
        topic.put(f"new{i}", b"y")
    assert read() == (topic.full(), 7)
    assert topic.reads[-1] == (0, 7)


def test_an_end_gone_back_is_read_from_zero_when_the_cluster_tells_no_topic_id(topic):
    topic.topic_id = ""
    for i in range(5):
        topic.put(f"old{i}", b"x")
    read()
    topic.records = [("new", b"y")]
    assert read() == ({"new": b"y"}, 1)
    assert topic.reads[-1] == (0, 1)


def test_a_missing_topic_reads_as_none_and_forgets_the_view(topic):
    topic.put("a", b"1")
    read()
    topic.topic_id = None
    assert read() is None
    topic.topic_id = "id-1"  # the same id cannot come back, but a view must not survive a gap anyway
    assert read() == ({"a": b"1"}, 1)
    assert topic.reads[-1] == (0, 1)


def test_a_topic_recreated_during_a_read_is_read_again_from_zero(topic):
    topic.put("a", b"1")
    read()
    topic.put("b", b"1")

    def recreate():
        topic.recreate()
        topic.put("c", b"1")
        topic.put("d", b"1")

    topic.on_read = recreate
    assert read() == ({"c": b"1", "d": b"1"}, 2)
    assert topic.reads[-2:] == [(1, 2), (0, 2)]


def test_a_failed_read_leaves_nothing_half_merged(topic, monkeypatch):
    topic.put("a", b"1")
    read()
    topic.put("a", None)
    topic.put("b", b"1")

    def failing(_conf, _admin, _topic, _alias, start=0, end=None):
        yield "a", None, 1
        raise MirrorError("broker went away")

    monkeypatch.setattr(cv, "read_topic", failing)
    with pytest.raises(MirrorError):
        read()
    monkeypatch.undo()
    assert cv.view_of("c1", "t").end == 0


def test_a_view_not_read_for_half_the_tombstone_retention_is_read_from_zero(topic, monkeypatch):
    topic.retention_ms = "1000"  # a view may be continued for 0.5 s
    topic.put("a", b"1")
    clock = [100.0]
    monkeypatch.setattr(cv, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    read()
    topic.put("b", b"1")
    clock[0] += 0.4
    read()
    clock[0] += 0.6
    topic.put("c", b"1")
    assert read() == (topic.full(), 3)
    assert topic.reads == [(0, 1), (1, 2), (0, 3)]


def test_views_are_kept_apart_per_cluster_and_topic(topic):
    topic.put("a", b"1")
    read("c1")
    read("c2")
    assert topic.reads == [(0, 1), (0, 1)]
    assert cv.cluster_key({"bootstrap.servers": "h:1"}) != cv.cluster_key({"bootstrap.servers": "h:2"})
    assert cv.cluster_key({"sasl.password": "secret"}).find("secret") == -1


def test_a_forked_child_starts_with_no_views(topic):
    topic.put("a", b"1")
    read()
    pid = os.fork()
    if pid == 0:  # the child: exit status says whether it had any view
        os._exit(0 if not cv._entries else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert cv._entries  # the parent's are untouched
