"""Incremental reading of the link's compacted state topics on the real local pair.

The state store reads the state and offset-map topics through this process's
views (`compacted_view`): a second read fetches only what was written since
the first, and still equals a read of the whole topic from offset 0, with
deleted keys gone, aborted transactions left out, and a topic deleted and
recreated under the same name read again from 0.
"""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer

from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link import compacted_view
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_store import ensure_internal_topics, read_topic, segment_key
from mirror_pipeline.link.topic_reading import TopicTail, topic_end, topic_identity
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.offset_map import Segment
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.replication.copier import CopyContext
from mirror_pipeline.replication.group_checks import ReadAhead
from tests.integration.conftest import LINK


@pytest.fixture
def ctx(write_config, unique_name) -> LinkContext:
    """A link with internal topics of its own, so no other test's records are in them."""
    tag = unique_name("state")
    config = load_config(
        write_config({"mirror.state.topic": f"_{tag}.state", "mirror.offset.map.topic": f"_{tag}.offset-map"})
    )
    ctx = LinkContext.open(config, LINK)
    ctx.store.ensure_topics()
    return ctx


def view(ctx: LinkContext, topic: str) -> compacted_view.CompactedView:
    return compacted_view.view_of(ctx.store._cluster, topic)


def full_read(ctx: LinkContext, topic: str) -> dict[str, bytes]:
    """The topic's latest value per key, read from offset 0 without any view."""
    latest: dict[str, bytes | None] = {}
    for key, value, _ in read_topic(ctx.store.conf("state-reader"), ctx.dest_admin, topic, ctx.dest.alias):
        latest[key] = value
    return {k: v for k, v in latest.items() if v is not None}


def write_segments(ctx: LinkContext, mirror: str, partition: int, starts: list[int], deletes=()) -> None:
    writer = ctx.segment_writer(mirror, partition)
    try:
        writer.fence()
        writer.write(
            puts=[Segment(s, ((s, 1),), s + 1) for s in starts],
            deletes=[segment_key(LINK, mirror, partition, s) for s in deletes],
        )
    finally:
        writer.close()


def segments_of(snapshot) -> dict[tuple[str, int], list[int]]:
    return {tp: [seg.dest_start for _, seg in keyed] for tp, keyed in snapshot.segments.items()}


def test_a_second_read_fetches_only_the_tail_and_equals_a_full_read(ctx):
    topic = ctx.store.offset_map_topic
    for p in range(4):
        write_segments(ctx, "orders", p, list(range(10)))
    first = ctx.store.read_segments()
    assert segments_of(first) == {("orders", p): list(range(10)) for p in range(4)}
    read_before = view(ctx, topic).records_read
    assert read_before == 40

    write_segments(ctx, "orders", 1, [10, 11], deletes=[0, 1, 2])  # two new, three deleted: 5 records
    second = ctx.store.read_segments()
    assert view(ctx, topic).records_read - read_before == 5
    assert second.end_offset > first.end_offset
    assert segments_of(second)[("orders", 1)] == list(range(3, 12))
    latest, end = ctx.store.read_latest(topic)
    assert dict(latest) == full_read(ctx, topic)
    # A commit is acknowledged before its marker is written: a later read may end one offset further.
    assert end >= second.end_offset

    # No record since: none fetched, the same view.
    third = ctx.store.read_segments(["orders"])
    assert view(ctx, topic).records_read - read_before == 5
    assert segments_of(third) == segments_of(second)


def test_a_new_state_store_of_the_same_process_continues_the_view(ctx, write_config):
    """Every verb opens its own LinkContext: the view belongs to the process, not to the store."""
    info = MirrorInfo(LINK, "orders", "orders", "ACTIVE", time.time(), "created", time.time())
    ctx.store.put_mirror(info)
    assert set(ctx.store.read_mirrors()) == {"orders"}
    state_topic = ctx.store.state_topic
    read_before = view(ctx, state_topic).records_read

    other = LinkContext.open(ctx.config, LINK)
    other.store.put_mirror(MirrorInfo(LINK, "payments", "payments", "ACTIVE", time.time(), "created", time.time()))
    other.store.delete_mirror("orders")
    assert set(ctx.store.read_mirrors()) == {"payments"}
    assert view(ctx, state_topic).records_read - read_before == 2
    assert set(full_read(ctx, state_topic)) == {f"mirror/{LINK}/payments"}


def test_aborted_transactions_in_the_tail_are_left_out(ctx):
    topic = ctx.store.offset_map_topic
    write_segments(ctx, "orders", 0, [0])
    ctx.store.read_segments()
    p = Producer(
        {"bootstrap.servers": ctx.dest.properties["bootstrap.servers"], "transactional.id": f"{topic}-aborter"}
    )
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, key=segment_key(LINK, "orders", 0, 5).encode(), value=Segment(5, ((5, 1),), 6).to_json())
    p.produce(topic, key=segment_key(LINK, "orders", 0, 0).encode(), value=None)
    p.abort_transaction(30)
    write_segments(ctx, "orders", 0, [1])
    assert segments_of(ctx.store.read_segments()) == {("orders", 0): [0, 1]}
    assert dict(ctx.store.read_latest(topic)[0]) == full_read(ctx, topic)


def test_a_topic_deleted_and_recreated_under_the_same_name_is_read_from_zero(ctx):
    topic = ctx.store.offset_map_topic
    write_segments(ctx, "orders", 0, [0, 1])
    assert segments_of(ctx.store.read_segments()) == {("orders", 0): [0, 1]}
    old_end = ctx.store.read_segments().end_offset
    old_id = topic_identity(ctx.dest_admin, topic, ctx.dest.alias)

    ctx.dest_admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:  # deletion completes in the background
        try:
            ensure_internal_topics(ctx.dest_admin, ctx.dest.alias, [topic], "test")
            write_segments(ctx, "payments", 3, list(range(20, 20 + old_end + 3)))
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    snapshot = ctx.store.read_segments()
    assert snapshot.end_offset >= old_end  # as long as before: only the topic id tells them apart
    assert old_id not in ("", None, topic_identity(ctx.dest_admin, topic, ctx.dest.alias))
    assert segments_of(snapshot) == {("payments", 3): list(range(20, 20 + old_end + 3))}
    assert dict(ctx.store.read_latest(topic)[0]) == full_read(ctx, topic)


def test_registry_naming_and_acl_records_come_from_the_same_view(ctx):
    ctx.store.put_link_record({"policy": "link"})
    ctx.store.put_acl_record({"bindings": []})
    ctx.store.put_mirror(MirrorInfo(LINK, "orders", "orders", "ACTIVE", time.time(), "created", time.time()))
    registry = ctx.store.read_registry()
    assert set(registry.mirrors[LINK]) == {"orders"}
    assert registry.links[LINK] == {"policy": "link"}
    assert ctx.store.read_acl_record() == {"bindings": []}
    ctx.store.put_acl_record({"bindings": [1]})
    assert ctx.store.read_acl_record() == {"bindings": [1]}
    state = full_read(ctx, ctx.store.state_topic)
    assert json.loads(state[f"acl/{LINK}"]) == {"bindings": [1]}


def _open_transaction(ctx: LinkContext, topic: str, name: str) -> Producer:
    """A transactional producer with one record of `topic` in a transaction still open, acknowledged."""
    p = Producer({"bootstrap.servers": ctx.dest.properties["bootstrap.servers"], "transactional.id": f"{topic}-{name}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, key=segment_key(LINK, "orders", 0, 7).encode(), value=Segment(7, ((7, 1),), 8).to_json())
    assert p.flush(30) == 0
    return p


def test_the_settled_end_waits_for_a_transaction_open_and_covers_what_it_commits(ctx):
    """The end a read goes to covers everything acknowledged before it asked, a transaction still open
    included once it ends: the log end and the last stable offset are asked side by side."""
    topic = ctx.store.offset_map_topic
    write_segments(ctx, "orders", 0, [0])
    p = _open_transaction(ctx, topic, "committer")
    committer = threading.Timer(0.5, lambda: p.commit_transaction(30))
    committer.start()
    try:
        asked = time.monotonic()
        end = topic_end(ctx.dest_admin, topic, ctx.dest.alias, timeout=20)
        waited = time.monotonic() - asked
    finally:
        committer.join()
    assert waited >= 0.3, f"the end came back in {waited:.2f}s, before the transaction ended"
    assert [
        k for k, _, _ in read_topic(ctx.store.conf("state-reader"), ctx.dest_admin, topic, ctx.dest.alias, end=end)
    ][-1] == segment_key(LINK, "orders", 0, 7)


def test_a_transaction_open_past_the_timeout_fails_the_read_naming_it(ctx):
    topic = ctx.store.offset_map_topic
    p = _open_transaction(ctx, topic, "stuck")
    try:
        with pytest.raises(MirrorError, match="has had a transaction open"):
            topic_end(ctx.dest_admin, topic, ctx.dest.alias, timeout=1)
    finally:
        p.abort_transaction(30)


def test_a_tail_read_on_after_more_writes_equals_one_read_from_its_start(ctx):
    """`TopicTail`, as a follow-mode task reads the offset map ahead of its fence and on after it:
    the two reads together are one read from the start, what was aborted left out."""
    topic = ctx.store.offset_map_topic
    write_segments(ctx, "orders", 0, [0])
    start = topic_end(ctx.dest_admin, topic, ctx.dest.alias)
    write_segments(ctx, "orders", 0, [1])
    conf = ctx.store.conf("state-reader")
    tail = TopicTail(conf, ctx.dest_admin, topic, ctx.dest.alias, start)
    try:
        ahead = tail.read()
        assert tail.read() == []  # nothing new
        _open_transaction(ctx, topic, "aborter").abort_transaction(30)
        write_segments(ctx, "orders", 1, [0])
        after = tail.read()
    finally:
        tail.close()
    assert [k for k, _, _ in ahead] == [segment_key(LINK, "orders", 0, 1)]
    assert [k for k, _, _ in after] == [segment_key(LINK, "orders", 1, 0)]
    assert ahead + after == list(read_topic(conf, ctx.dest_admin, topic, ctx.dest.alias, start=start))


@pytest.mark.parametrize("left_open_on", ["offset map", "state"])
def test_reading_ahead_of_a_fence_gives_up_on_a_transaction_left_open(ctx, left_open_on):
    """A follow-mode task taking over reads the state and the offset map ahead of its fence
    (`ReadAhead`). A transaction its killed predecessor left open on either is not waited for: the
    broker would end it only after the writers' transaction timeout, while the fence ends the map's
    at once. Nothing read ahead is kept then, and the check reads both after the fence as before."""
    topic = ctx.store.offset_map_topic
    write_segments(ctx, "orders", 0, [0])
    copy_ctx = CopyContext("source", ctx.dest.alias, {}, ctx.dest.properties, topic, 10000, ctx.store.state_topic)
    taking_over = [SimpleNamespace(unit=SimpleNamespace(map_snapshot_end=0))]
    ahead = ReadAhead(copy_ctx, LINK, taking_over)
    ahead.read(lambda: ctx.dest_admin)
    try:
        assert ahead.map_tail is not None and [start for _, start, _ in ahead.map_writes] == [0]
    finally:
        ahead.close()
    left_open = _open_transaction(ctx, topic if left_open_on == "offset map" else ctx.store.state_topic, "killed")
    try:
        ahead = ReadAhead(copy_ctx, LINK, taking_over)
        ahead.read(lambda: ctx.dest_admin)
        assert ahead.map_tail is None and ahead.map_writes == []
    finally:
        left_open.abort_transaction(30)
