"""Consumer offset sync on the real local pair (R-OFS-1..7, R-LC-3).

Every test names its own groups with a unique prefix and gives the link a
group filter for that prefix only: the clusters are shared by every test.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from itertools import pairwise

import pytest
import yaml
from confluent_kafka import Consumer, Producer

from mirror_pipeline import engine
from mirror_pipeline.cli.lifecycle import _render_preview
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.sync import committed_offsets as listing
from mirror_pipeline.sync import offset_groups, offset_sync
from tests.integration.conftest import LINK
from tests.kafka_records import commit, committed, read_partition
from tests.kafka_tools import run_kafka_tool

# --- helpers ----------------------------------------------------------------------------


def offset_config(write_config, group_prefix: str, **settings):
    """A config whose link syncs the groups named `<group_prefix>...`."""
    filters = {"groupFilters": [{"name": group_prefix, "patternType": "PREFIXED", "filterType": "INCLUDE"}]}
    return load_config(
        write_config(
            {
                "consumer.offset.sync.enable": True,
                "consumer.offset.group.filters": filters,
                **settings,
            }
        )
    )


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, start_ts: int | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        extra = {"timestamp": start_ts + i} if start_ts is not None else {}
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions, **extra)
    assert p.flush(30) == 0


def produce_transactions(
    bootstrap: str, topic: str, txn_id: str, batches: int = 6, per_batch: int = 10, start_ts: int | None = None
) -> None:
    """Committed and aborted transactions (every third aborted): gaps of aborted data and markers."""
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    tx.init_transactions(30)
    n = 0
    for batch in range(batches):
        tx.begin_transaction()
        for i in range(per_batch):
            extra = {"timestamp": start_ts + n} if start_ts is not None else {}
            tx.produce(topic, key=b"k", value=f"b{batch}-{i}".encode(), partition=0, **extra)
            n += 1
        if batch % 3 == 1:
            tx.flush(10)
            tx.abort_transaction(30)
        else:
            tx.commit_transaction(30)


def expected_landing(source: list, mirror: list, position: int, mirror_end: int) -> int:
    """The mirror offset of the first source record at or after `position` (records compared in order)."""
    for s, m in zip(source, mirror, strict=False):  # the mirror may be shorter
        if s.offset >= position:
            return m.offset
    return mirror_end


def mirrored(
    config, spark, source_bootstrap, create_topic, topic_name: str, count: int = 0, partitions: int = 1, **topic_config
) -> str:
    topic = create_topic(source_bootstrap, topic_name, partitions=partitions, config=topic_config or None)
    if count:
        produce(source_bootstrap, topic, count, partitions)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    return topic


def mirrored_transactions(config, spark, source_bootstrap, create_topic, unique_name) -> str:
    """A one-partition topic of committed and aborted transactions (gaps: markers, aborted data), mirrored."""
    topic = create_topic(source_bootstrap, unique_name())
    produce_transactions(source_bootstrap, topic, unique_name("tx"))
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    return topic


def group_result(result, group: str):
    return next(g for g in result.groups if g.source_group == group)


@pytest.fixture(params=["listed at once", "asked group by group"])
def offsets_read(request, monkeypatch) -> list[tuple[str, dict]]:
    """Groups' committed offsets listed whole by the child process, on both clusters (what it
    answered is recorded with the cluster's alias), or, as when that child fails, asked group by
    group by consumers."""
    answers: list[tuple[str, dict]] = []
    if request.param == "asked group by group":
        monkeypatch.setattr(offset_sync, "committed_offsets", lambda *args: {})
    else:

        def recorded(conf, groups, alias, timeout_s):
            answers.append((alias, listing.committed_offsets(conf, groups, alias, timeout_s)))
            return answers[-1][1]

        monkeypatch.setattr(offset_sync, "committed_offsets", recorded)
    return answers


# --- exact translation ------------------------------------------------------------------


def test_lagging_groups_land_exactly_on_a_gap_free_mirror(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, offsets_read, monkeypatch
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=200, partitions=2)
    lags = {f"{prefix}-a": {0: 0, 1: 7}, f"{prefix}-b": {0: 60, 1: 99}, f"{prefix}-c": {0: 100, 1: 100}}
    for group, positions in lags.items():
        commit(source_bootstrap, group, topic, positions)
    clients: list[str] = []
    opened = offset_groups.GroupClient
    monkeypatch.setattr(offset_groups, "GroupClient", lambda conf, g, at: clients.append(g) or opened(conf, g, at))

    result = engine.sync_offsets(config, LINK, [topic])

    for group, positions in lags.items():
        assert committed(destination_bootstrap, group, topic, 2) == positions
        assert group_result(result, group).status == "synced"
    # Listed: every commit made at once by the listing's child process, no group opened a client.
    assert clients == [] if offsets_read else sorted(set(clients)) == sorted(lags)
    assert result.committed == 6  # position 0 too: the destination groups had no offsets yet
    assert result.offset_sync_lag == 0
    assert result.checkpoint_latency_ms is not None and result.checkpoint_latency_ms > 0
    assert result.to_dict()["groups"][0]["partitions"][0]["action"] in ("committed", "clamped to mirror log end")

    clients.clear()
    again = engine.sync_offsets(config, LINK, [topic])
    assert again.committed == 0
    assert {p.action for g in again.groups for p in g.partitions} == {"unchanged"}
    if offsets_read:  # in sync by the destination's listing: reported from it, no group opened a client
        assert clients == []
    else:  # nothing listed: each group read its offsets with clients of its own (source and destination)
        assert sorted(set(clients)) == sorted(lags)
    if offsets_read:  # the child listed every group's offsets on both clusters, once a sync: its answers were used
        offsets = {g: {(topic, p): o for p, o in pos.items()} for g, pos in lags.items()}
        source = config.link(LINK).source
        assert [answer for alias, answer in offsets_read if alias == source] == [offsets, offsets]
        # On the destination: no offsets before the first sync, the translations (a gap-free mirror) after.
        assert [answer for alias, answer in offsets_read if alias != source] == [{g: {} for g in lags}, offsets]


def test_transactional_partition_lands_after_aborted_data_and_markers(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored_transactions(config, spark, source_bootstrap, create_topic, unique_name)
    source = read_partition(source_bootstrap, topic, 0)
    mirror = read_partition(destination_bootstrap, topic, 0, committed_only=False)
    source_end = source[-1].offset + 2  # last record, then the commit marker
    # Positions inside committed runs, on aborted records, on markers, at the end, past the end.
    positions = [0, 5, 10, 11, 15, 21, 22, 30, 33, 40, 50, 55, 60, source_end]
    for i, pos in enumerate(positions):
        commit(source_bootstrap, f"{prefix}-{i}", topic, {0: pos})

    result = engine.sync_offsets(config, LINK, [topic])

    assert result.offset_sync_lag == 0
    for i, pos in enumerate(positions):
        want = expected_landing(source, mirror, pos, mirror[-1].offset + 1)
        assert committed(destination_bootstrap, f"{prefix}-{i}", topic) == {0: want}, f"source position {pos}"
        assert engine.translate_offset(config, LINK, topic, 0, pos)["translated_offset"] == want
    # The mirror is shorter than the source: the translation is not the identity.
    assert mirror[-1].offset < source[-1].offset


def test_compacted_partition_with_holes_lands_on_the_next_kept_record(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = create_topic(
        source_bootstrap,
        unique_name(),
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "86400000",
        },
    )
    p = Producer({"bootstrap.servers": source_bootstrap, "linger.ms": 5})
    for round_ in range(6):
        for i in range(20):
            p.produce(topic, key=b"k%d" % (i % 5), value=b"r%d-%d" % (round_, i))
        p.flush(10)
        time.sleep(0.3)
    source = _wait_for_holes(source_bootstrap, topic)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    mirror = read_partition(destination_bootstrap, topic, 0)
    holes = [a.offset + 1 for a, b in pairwise(source) if b.offset != a.offset + 1]
    positions = sorted(
        {0, holes[0], holes[-1], source[len(source) // 2].offset, source[-1].offset, source[-1].offset + 1}
    )
    for i, pos in enumerate(positions):
        commit(source_bootstrap, f"{prefix}-{i}", topic, {0: pos})

    engine.sync_offsets(config, LINK, [topic])

    for i, pos in enumerate(positions):
        want = expected_landing(source, mirror, pos, mirror[-1].offset + 1)
        assert committed(destination_bootstrap, f"{prefix}-{i}", topic) == {0: want}, f"source position {pos}"


def _wait_for_holes(bootstrap: str, topic: str, timeout: float = 90):
    deadline = time.monotonic() + timeout
    p = Producer({"bootstrap.servers": bootstrap})
    while time.monotonic() < deadline:
        records = read_partition(bootstrap, topic, 0)
        if records and any(b.offset != a.offset + 1 for a, b in pairwise(records)):
            time.sleep(2)  # the cleaner may still be at work: wait until the log holds still
            if read_partition(bootstrap, topic, 0) == records:
                return records
            continue
        p.produce(topic, key=b"roll", value=b"x")  # rolls the active segment so the cleaner sees it
        p.flush(10)
        time.sleep(1)
    pytest.fail("the log cleaner did not compact the source within the timeout")


# --- the guards: active groups, no backward moves, prefixes, the log-end clamp -----------


class DestinationConsumer:
    """A real consumer in `group` on the destination: subscribed and polling until stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
            }
        )
        self.consumer.subscribe([topic])
        self.assigned = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        assert self.assigned.wait(60), "the destination consumer never got its partitions"

    def _poll(self):
        while not self._stop.is_set():
            self.consumer.poll(0.2)
            if self.consumer.assignment():
                self.assigned.set()

    def close(self):
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def test_a_group_active_on_the_destination_is_left_alone(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=50)
    group = f"{prefix}-busy"
    commit(source_bootstrap, group, topic, {0: 30})
    consumer = DestinationConsumer(destination_bootstrap, group, topic)
    try:
        result = engine.sync_offsets(config, LINK, [topic])
        assert committed(destination_bootstrap, group, topic) == {0: None}
        assert group_result(result, group).status == "skipped: 1 active member"
        assert result.offset_sync_lag == 1 and result.committed == 0
    finally:
        consumer.close()
    # Once the consumer left, the next sync lands the group.
    deadline = time.monotonic() + 30
    while (result := engine.sync_offsets(config, LINK, [topic])).offset_sync_lag and time.monotonic() < deadline:
        time.sleep(1)
    assert committed(destination_bootstrap, group, topic) == {0: 30}


def test_a_destination_group_is_never_moved_backwards(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, offsets_read
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=50)
    group = f"{prefix}-ahead"
    commit(source_bootstrap, group, topic, {0: 20})
    commit(destination_bootstrap, group, topic, {0: 35})  # consumed further on the destination already

    result = engine.sync_offsets(config, LINK, [topic])

    assert committed(destination_bootstrap, group, topic) == {0: 35}
    (row,) = group_result(result, group).partitions
    assert (row.translated_offset, row.previous_offset, row.action) == (20, 35, "kept (destination ahead)")
    assert result.offset_sync_lag == 0
    commit(source_bootstrap, group, topic, {0: 45})
    engine.sync_offsets(config, LINK, [topic])
    assert committed(destination_bootstrap, group, topic) == {0: 45}


def test_a_group_that_moves_between_the_listing_and_the_commit_is_decided_again(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch
):
    """The listing's child commits a group only if its destination offsets are still those listed:
    one a consumer moved in between is read again and kept, not moved backwards."""
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=50)
    moved, still = f"{prefix}-moved", f"{prefix}-still"
    for group in (moved, still):
        commit(source_bootstrap, group, topic, {0: 20})
    sent: list[set] = []

    def a_consumer_commits_first(conf, commits, alias, timeout_s):
        sent.append(set(commits))
        commit(destination_bootstrap, moved, topic, {0: 40})  # consumed on the destination meanwhile
        return listing.commit_if_unchanged(conf, commits, alias, timeout_s)

    monkeypatch.setattr(offset_sync, "commit_if_unchanged", a_consumer_commits_first)
    result = engine.sync_offsets(config, LINK, [topic])

    assert sent == [{moved, still}]
    assert committed(destination_bootstrap, still, topic) == {0: 20}
    assert committed(destination_bootstrap, moved, topic) == {0: 40}
    (row,) = group_result(result, moved).partitions
    assert (row.translated_offset, row.previous_offset, row.action) == (20, 40, "kept (destination ahead)")
    assert group_result(result, still).partitions[0].action == "committed"
    assert result.committed == 1


def test_prefixed_link_syncs_into_prefixed_groups(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    # Its own state topics: the shared link's state records it unprefixed, and a prefix cannot change.
    own_state = {"mirror.state.topic": f"{prefix}.state", "mirror.offset.map.topic": f"{prefix}.omap"}
    config = offset_config(
        write_config, prefix, **own_state, **{"cluster.link.prefix": "west.", "consumer.group.prefix.enable": True}
    )
    source_topic = create_topic(source_bootstrap, unique_name())
    produce(source_bootstrap, source_topic, 40)
    mirror = engine.create_mirror(config, LINK, source_topic).mirror_topic
    engine.run_cycle(config, LINK, spark, mirrors=[mirror])
    group = f"{prefix}-app"
    commit(source_bootstrap, group, source_topic, {0: 17})

    result = engine.sync_offsets(config, LINK, [mirror])

    assert mirror == f"west.{source_topic}"
    assert group_result(result, group).destination_group == f"west.{group}"
    assert committed(destination_bootstrap, f"west.{group}", mirror) == {0: 17}
    assert committed(destination_bootstrap, group, mirror) == {0: None}


def test_a_group_ahead_of_the_mirror_lands_on_its_log_end(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=50)
    produce(source_bootstrap, topic, 30)  # on the source only: the mirror holds 50
    group = f"{prefix}-fast"
    commit(source_bootstrap, group, topic, {0: 75})

    result = engine.sync_offsets(config, LINK, [topic])

    assert committed(destination_bootstrap, group, topic) == {0: 50}
    (row,) = group_result(result, group).partitions
    assert (row.source_offset, row.translated_offset, row.action) == (75, 50, "clamped to mirror log end")
    assert engine.translate_offset(config, LINK, topic, 0, 75)["beyond_mirror"] is True


# --- checkpoints, export, the real kafka-consumer-groups tool ----------------------------


def reset_from_file(bootstrap: str, plan, *group_args: str) -> str:
    return run_kafka_tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--from-file",
        str(plan),
        *group_args,
        "--execute",
    )


def test_exported_plan_applied_with_kafka_consumer_groups_puts_groups_where_translated(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, tmp_path
):
    from click.testing import CliRunner

    from mirror_pipeline.cli import cli

    prefix = unique_name("g")
    config_path = write_config(
        {
            "consumer.offset.sync.enable": True,
            "consumer.offset.group.filters": {
                "groupFilters": [{"name": prefix, "patternType": "PREFIXED", "filterType": "INCLUDE"}]
            },
        }
    )
    config = load_config(config_path)
    # Gaps: the plan is not the identity.
    topic = mirrored_transactions(config, spark, source_bootstrap, create_topic, unique_name)
    first, second = f"{prefix}-one", f"{prefix}-two"
    commit(source_bootstrap, first, topic, {0: 44})
    commit(source_bootstrap, second, topic, {0: 22})
    # Both are busy on the destination: the sync only records checkpoints.
    busy = [DestinationConsumer(destination_bootstrap, g, topic) for g in (first, second)]
    try:
        result = engine.sync_offsets(config, LINK, [topic])
    finally:
        for c in busy:
            c.close()
    landing = {g.source_group: g.partitions[0].translated_offset for g in result.groups}
    assert result.committed == 0 and landing[first] < 44 and landing[second] < 22

    runner = CliRunner()
    one = tmp_path / "one.csv"
    out = runner.invoke(
        cli, ["offsets", "export", "--link", LINK, "--group", first, "--output", str(one), "--config", str(config_path)]
    )
    assert out.exit_code == 0, out.output
    assert one.read_text() == f"{topic},0,{landing[first]}\n"
    both = tmp_path / "both.csv"
    out = runner.invoke(
        cli,
        [
            "offsets",
            "export",
            "--link",
            LINK,
            "--group",
            first,
            "--group",
            second,
            "--output",
            str(both),
            "--config",
            str(config_path),
        ],
    )
    assert out.exit_code == 0, out.output
    assert sorted(csv.reader(both.read_text().splitlines())) == sorted(
        [[first, topic, "0", str(landing[first])], [second, topic, "0", str(landing[second])]]
    )

    reset_from_file(destination_bootstrap, one, "--group", first)
    assert committed(destination_bootstrap, first, topic) == {0: landing[first]}
    reset_from_file(destination_bootstrap, both, "--group", first, "--group", second)
    assert committed(destination_bootstrap, second, topic) == {0: landing[second]}

    unknown = runner.invoke(
        cli, ["offsets", "export", "--link", LINK, "--group", f"{prefix}-nobody", "--config", str(config_path)]
    )
    assert unknown.exit_code != 0 and f"{prefix}-nobody" in unknown.output


# --- timestamp mode ---------------------------------------------------------------------


def test_timestamp_mode_lands_by_record_timestamp_and_never_backwards(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix, **{"offset.translation.mode": "timestamp"})
    topic = create_topic(source_bootstrap, unique_name())
    # Distinct, increasing timestamps: here the timestamp way agrees with the offset map.
    produce_transactions(source_bootstrap, topic, unique_name("tx"), start_ts=int(time.time() * 1000) - 600_000)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    source = read_partition(source_bootstrap, topic, 0)
    mirror = read_partition(destination_bootstrap, topic, 0, committed_only=False)
    positions = [0, 7, 12, 21, 35, 58, source[-1].offset + 2]
    for i, pos in enumerate(positions):
        commit(source_bootstrap, f"{prefix}-{i}", topic, {0: pos})
    commit(destination_bootstrap, f"{prefix}-{len(positions)}", topic, {0: 30})  # ahead of its translation
    commit(source_bootstrap, f"{prefix}-{len(positions)}", topic, {0: 5})

    result = engine.sync_offsets(config, LINK, [topic])

    assert result.mode == "timestamp"
    for i, pos in enumerate(positions):
        want = expected_landing(source, mirror, pos, mirror[-1].offset + 1)
        assert committed(destination_bootstrap, f"{prefix}-{i}", topic) == {0: want}, f"source position {pos}"
        assert engine.translate_offset(config, LINK, topic, 0, pos, mode="exact")["translated_offset"] == want
    assert committed(destination_bootstrap, f"{prefix}-{len(positions)}", topic) == {0: 30}
    assert group_result(result, f"{prefix}-{len(positions)}").partitions[0].action == "kept (destination ahead)"


# --- promote and failover (R-OFS-7, R-LC-3) ----------------------------------------------


def test_promote_with_offset_sync_leaves_groups_exactly_translated(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored_transactions(config, spark, source_bootstrap, create_topic, unique_name)
    produce_transactions(source_bootstrap, topic, unique_name("tx2"), batches=3)  # promote copies these
    source = read_partition(source_bootstrap, topic, 0)
    positions = {f"{prefix}-early": 12, f"{prefix}-late": source[-1].offset - 3}
    for group, pos in positions.items():
        commit(source_bootstrap, group, topic, {0: pos})

    result = engine.promote(config, LINK, spark, [topic], timeout_s=120)

    outcome = result.mirrors[topic]
    assert outcome["after"] == "STOPPED" and "offset-sync lag 0" in outcome["said"]
    mirror = read_partition(destination_bootstrap, topic, 0, committed_only=False)
    for group, pos in positions.items():
        want = expected_landing(source, mirror, pos, mirror[-1].offset + 1)
        assert committed(destination_bootstrap, group, topic) == {0: want}
        row = next(r for r in outcome["consumer_groups"] if r["source_group"] == group)
        assert (row["source_offset"], row["lands_at"]) == (pos, want)


def test_failover_dry_run_lists_landings_and_failover_clamps_offsets_past_the_mirror_end(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=50)
    produce(source_bootstrap, topic, 25)  # not mirrored: the failover leaves them behind
    behind_group, ahead_group = f"{prefix}-behind", f"{prefix}-ahead"
    commit(source_bootstrap, behind_group, topic, {0: 20})
    commit(source_bootstrap, ahead_group, topic, {0: 70})
    commit(destination_bootstrap, ahead_group, topic, {0: 500})  # somehow past the mirror's end

    previewed = engine.preview_stop(config, LINK, [topic])
    rows = {r["source_group"]: r for r in previewed[topic]["consumer_groups"]}
    shown = _render_preview(previewed)  # what `mirror failover --dry-run` prints
    assert "LANDS AT" in shown
    assert any(
        ahead_group in line and " 50 " in line and "clamped to mirror log end" in line for line in shown.splitlines()
    )
    assert (rows[behind_group]["lands_at"], rows[behind_group]["action"]) == (20, "would commit")
    assert (rows[ahead_group]["lands_at"], rows[ahead_group]["action"]) == (50, "clamped to mirror log end")
    assert committed(destination_bootstrap, behind_group, topic) == {0: None}  # the dry run changed nothing
    assert committed(destination_bootstrap, ahead_group, topic) == {0: 500}

    result = engine.failover(config, LINK, [topic])

    assert result.mirrors[topic]["after"] == "STOPPED"
    assert committed(destination_bootstrap, behind_group, topic) == {0: 20}
    assert committed(destination_bootstrap, ahead_group, topic) == {0: 50}


def test_failover_without_the_source_still_clamps_destination_offsets(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, tmp_path
):
    prefix = unique_name("g")
    config = offset_config(write_config, prefix)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=40)
    group = f"{prefix}-app"
    commit(destination_bootstrap, group, topic, {0: 300})
    data = yaml.safe_load((tmp_path / "mirror.yaml").read_text())
    data["clusters"]["us-west"]["bootstrap.servers"] = "127.0.0.1:1"  # nothing listens there
    (tmp_path / "dead.yaml").write_text(yaml.safe_dump(data))

    result = engine.failover(load_config(tmp_path / "dead.yaml"), LINK, [topic])

    outcome = result.mirrors[topic]
    assert outcome["after"] == "STOPPED"
    assert committed(destination_bootstrap, group, topic) == {0: 40}
    assert any("source unreachable" in n for n in outcome["offset_sync_notes"])


# --- the command line -------------------------------------------------------------------


def test_cli_sync_and_translate_speak_plainly_and_fail_clearly(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    from click.testing import CliRunner

    from mirror_pipeline.cli import cli

    prefix = unique_name("g")
    path = write_config(
        {
            "consumer.offset.sync.enable": True,
            "consumer.offset.group.filters": {
                "groupFilters": [{"name": prefix, "patternType": "PREFIXED", "filterType": "INCLUDE"}]
            },
        }
    )
    config = load_config(path)
    topic = mirrored(config, spark, source_bootstrap, create_topic, unique_name(), count=30)
    commit(source_bootstrap, f"{prefix}-cli", topic, {0: 12})
    runner = CliRunner()

    synced = runner.invoke(cli, ["offsets", "sync", "--link", LINK, "--mirror", topic, "--config", str(path), "--json"])
    assert synced.exit_code == 0, synced.output
    body = json.loads(synced.output)
    assert body["offset_sync_lag"] == 0 and body["groups"][0]["partitions"][0]["translated_offset"] == 12
    text = runner.invoke(
        cli,
        [
            "offsets",
            "translate",
            "--link",
            LINK,
            "--topic",
            topic,
            "--partition",
            "0",
            "--offset",
            "12",
            "--config",
            str(path),
        ],
    )
    assert text.exit_code == 0 and f"{topic}[0] offset 12 -> {topic}[0] offset 12" in text.output

    for args, says in (
        (
            ["--topic", "no-such-topic", "--partition", "0", "--offset", "1"],
            "'no-such-topic' is neither a mirror topic",
        ),
        (["--topic", topic, "--partition", "9", "--offset", "1"], "has no partition 9"),
    ):
        bad = runner.invoke(cli, ["offsets", "translate", "--link", LINK, *args, "--config", str(path)])
        assert bad.exit_code == 1 and says in bad.output
    unknown_link = runner.invoke(cli, ["offsets", "sync", "--link", "nowhere", "--config", str(path)])
    assert unknown_link.exit_code == 1 and "nowhere" in unknown_link.output


def test_the_commit_child_of_a_sync_that_died_commits_nothing(destination_bootstrap, create_topic, unique_name):
    """A sync killed while its child commits (a failover's, say) must not commit after its death."""
    topic = create_topic(destination_bootstrap, unique_name())
    group = unique_name("g")
    gone = subprocess.Popen(["true"])
    gone.wait()

    def child_of(parent: int) -> list:
        request = {
            "conf": {"bootstrap.servers": destination_bootstrap},
            "timeout_s": 10,
            "parent": parent,
            "commits": {group: {"expected": [[topic, 0, None]], "offsets": [[topic, 0, 5]]}},
        }
        for _attempt in range(5):
            done = subprocess.run(
                [sys.executable, "-m", listing.__name__],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=60,
            )
            if done.returncode != -signal.SIGSEGV:  # librdkafka #5040, on a coordinator still loading: why a child
                break
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert child_of(gone.pid) == []
    assert committed(destination_bootstrap, group, topic) == {0: None}
    assert child_of(os.getpid()) == [group]  # its parent alive: the same request commits
    assert committed(destination_bootstrap, group, topic) == {0: 5}
