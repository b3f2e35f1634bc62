"""`verify` on the real local pair (R-REL-4): it passes on every kind of correct mirror, and
finds, naming the first bad source offset, every kind of corruption.

Corrupted mirrors are fabricated the way the copier writes them: the mirror is
created by the engine, then its partition writer is fenced, its segment is
written to the offset-map topic, and its records are produced (one altered).
"""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import NewPartitions

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorRefused
from mirror_pipeline.model.offset_map import Segment, runs_of
from tests.integration.conftest import LINK
from tests.integration.test_copy import _wait_for_holes
from tests.kafka_records import Record, read_partition


def produce(bootstrap: str, topic: str, records: list[dict], **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0


def rich_records(n: int, partitions: int = 1) -> list[dict]:
    """Null keys and values, empty and binary headers, repeated header names."""
    out = []
    for i in range(n):
        headers = [("trace", bytes([i % 256, 0, 255])), ("dup", b"first"), ("dup", b"second"), ("empty", b"")]
        out.append(
            {
                "key": None if i % 7 == 0 else b"key-%d" % i,
                "value": None if i % 11 == 0 else b"v%d-" % i * 20,
                "headers": headers if i % 3 else None,
                "partition": i % partitions,
            }
        )
    return out


def verified(config, spark, topic: str, **options):
    result = engine.verify_mirrors(config, LINK, spark, [topic], **options)
    return result, result.mirrors[topic]


def assert_identical(mirror, records: int | None = None) -> None:
    assert mirror.identical, mirror.problem()
    if records is not None:
        assert mirror.source_records == records
    assert all(p.source_records == p.mirror_records for p in mirror.partitions)


# --- correct mirrors pass ---------------------------------------------------------------------


def test_a_fresh_gap_free_mirror_is_identical(config, spark, source_bootstrap, create_topic, unique_name):
    topic = create_topic(source_bootstrap, unique_name(), partitions=3)
    produce(source_bootstrap, topic, rich_records(900, 3))
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    result, mirror = verified(config, spark, topic)

    assert_identical(mirror, 900)
    assert result.identical and result.tasks >= 3
    assert [(p.source_from, p.source_until) for p in mirror.partitions] == [(0, 300)] * 3
    assert json.dumps(result.to_dict())  # plain data, printable as JSON


def test_a_compacted_mirror_with_holes_is_identical(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(
        source_bootstrap,
        unique_name(),
        partitions=1,
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "86400000",
        },
    )
    for round_ in range(6):
        produce(
            source_bootstrap,
            topic,
            [
                {"key": b"k%d" % (i % 5), "value": None if (i + round_) % 9 == 0 else b"r%d-%d" % (round_, i)}
                for i in range(20)
            ],
        )
        time.sleep(0.3)
    _wait_for_holes(source_bootstrap, topic)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    _, mirror = verified(config, spark, topic)

    assert mirror.identical, mirror.problem()
    # Every mirror record was compared or forgiven (a cleaner removed it on one side after the copy). Both
    # cleaners go on after the holes appeared: under load the source's had removed five more by the copy.
    partition = mirror.partitions[0]
    assert partition.source_records == partition.mirror_records
    assert (
        partition.mirror_records + partition.compacted_away >= len(read_partition(destination_bootstrap, topic, 0)) > 0
    )


def test_a_transactional_mirror_without_aborted_data_is_identical(
    config, spark, source_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    tx = Producer({"bootstrap.servers": source_bootstrap, "transactional.id": unique_name("tx")})
    tx.init_transactions(30)
    for batch in range(6):
        tx.begin_transaction()
        for i in range(10):
            tx.produce(topic, value=b"b%d-%d" % (batch, i), key=b"k", partition=i % 2, headers=[("n", b"%d" % i)])
        if batch % 3 == 1:
            tx.flush(10)
            tx.abort_transaction(30)
        else:
            tx.commit_transaction(30)
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    _, mirror = verified(config, spark, topic)

    assert_identical(mirror, 40)  # 4 committed transactions of 10; markers and aborted data never count


def test_an_aligned_mirror_of_a_source_starting_above_zero_is_identical(
    config, spark, source_bootstrap, create_topic, unique_name, admin
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, rich_records(100))
    admin(source_bootstrap).delete_records([TopicPartition(topic, 0, 40)])[TopicPartition(topic, 0, 40)].result()
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    _, mirror = verified(config, spark, topic)

    assert_identical(mirror, 60)
    p = mirror.partitions[0]
    assert (p.source_from, p.source_until, p.mirror_from, p.mirror_until) == (40, 100, 40, 100)


def test_a_mirror_whose_source_grew_partitions_is_identical(
    config, spark, source_bootstrap, create_topic, unique_name, admin
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, rich_records(40, 2))
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    admin(source_bootstrap).create_partitions([NewPartitions(topic, 4)])[topic].result()
    time.sleep(1)
    produce(source_bootstrap, topic, rich_records(80, 4))

    _, before = verified(config, spark, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    _, after = verified(config, spark, topic)

    # Before the cycle grows it, the new partitions are said to be missing, not counted as different.
    assert (
        before.identical
        and [p.note for p in before.partitions[2:]] == ["not on the mirror yet: the next cycle adds it"] * 2
    )
    assert_identical(after, 120)
    assert len(after.partitions) == 4


def test_a_stopped_mirror_is_identical_up_to_its_stop_despite_later_writes(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, rich_records(100, 2))
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    engine.failover(config, LINK, [topic])
    # After the failover both sides take new writes: the source's were never mirrored,
    # the topic's are its new producers'. Neither is part of the mirror.
    produce(source_bootstrap, topic, [{"value": b"late-source", "partition": p} for p in (0, 1)] * 5)
    produce(destination_bootstrap, topic, [{"value": b"new-producer", "partition": p} for p in (0, 1)] * 7)

    _, mirror = verified(config, spark, topic)

    assert mirror.state == "STOPPED"
    assert_identical(mirror, 100)
    assert [(p.source_from, p.source_until) for p in mirror.partitions] == [(0, 50), (0, 50)]


# --- corrupted mirrors are found --------------------------------------------------------------


def fabricate(config, source_bootstrap: str, destination_bootstrap: str, topic: str, alter) -> list[Record]:
    """A mirror of partition 0 written as the copier writes it, with `alter(source records)` as its records.

    `alter` returns (records to produce, the segment's source offsets). Returns the source records.
    """
    engine.create_mirror(config, LINK, topic)
    source = read_partition(source_bootstrap, topic, 0)
    records, offsets = alter(list(source))
    ctx = LinkContext.open(config, LINK)
    writer = ctx.segment_writer(topic, 0)
    try:
        writer.fence()
        writer.write(puts=[Segment(0, tuple(runs_of(offsets)), source[-1].offset + 1, written_at=time.time())])
    finally:
        writer.close()
    produce(
        destination_bootstrap,
        topic,
        [
            {
                "key": r.key,
                "value": r.value,
                "headers": list(r.headers) if r.headers else None,
                "timestamp": r.timestamp,
                "partition": 0,
            }
            for r in records
        ],
        **{"enable.idempotence": True},
    )
    return source


@pytest.fixture
def source_topic(source_bootstrap, create_topic, unique_name):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(
        source_bootstrap,
        topic,
        [
            {
                "key": b"key-%d" % i,
                "value": b"value-%04d" % i * 10,
                "partition": 0,
                "headers": [("first", b"\x01"), ("second", b"\x02\xff"), ("first", b"again")],
            }
            for i in range(12000)
        ],
    )
    return topic


BAD = 7321  # in the second checksum range: the first one must still compare equal


def test_a_flipped_byte_in_a_value_is_found(config, spark, source_bootstrap, destination_bootstrap, source_topic):
    def flip(source):
        bad = source[BAD]
        value = bytearray(bad.value)
        value[17] ^= 0x01
        records = (
            source[:BAD]
            + [Record(0, BAD, bad.key, bytes(value), bad.headers, bad.timestamp, bad.timestamp_type)]
            + source[BAD + 1 :]
        )
        return records, [r.offset for r in source]

    fabricate(config, source_bootstrap, destination_bootstrap, source_topic, flip)
    _, mirror = verified(config, spark, source_topic)

    m = mirror.partitions[0].mismatch
    assert (m.source_offset, m.mirror_offset, m.reason) == (BAD, BAD, "value differs")
    assert m.source.value_length == m.mirror.value_length and m.source.digest != m.mirror.digest
    assert mirror.problem() == (
        f"mirror '{source_topic}' partition 0: first difference at source offset {BAD} "
        f"(mirror offset {BAD}): value differs"
    )


def test_a_missing_record_is_found(config, spark, source_bootstrap, destination_bootstrap, source_topic):
    def drop(source):
        kept = source[:BAD] + source[BAD + 1 :]
        return kept, [r.offset for r in kept]

    fabricate(config, source_bootstrap, destination_bootstrap, source_topic, drop)
    _, mirror = verified(config, spark, source_topic)

    m = mirror.partitions[0].mismatch
    assert (m.source_offset, m.mirror) == (BAD, None)
    assert m.reason.startswith("missing on the mirror")


def test_a_duplicated_record_is_found(config, spark, source_bootstrap, destination_bootstrap, source_topic):
    def duplicate(source):
        # The record at BAD lands twice; the segment maps every mirror offset to the source's.
        return source[: BAD + 1] + [source[BAD]] + source[BAD + 1 : -1], [r.offset for r in source[:-1]]

    fabricate(config, source_bootstrap, destination_bootstrap, source_topic, duplicate)
    _, mirror = verified(config, spark, source_topic)

    m = mirror.partitions[0].mismatch
    assert (m.source_offset, m.mirror_offset) == (BAD + 1, BAD + 1)
    assert m.reason == f"the mirror holds a duplicate of source offset {BAD} here"


def test_two_reordered_headers_are_found(config, spark, source_bootstrap, destination_bootstrap, source_topic):
    def reorder(source):
        bad = source[BAD]
        h = bad.headers
        swapped = (h[1], h[0]) + h[2:]
        records = (
            source[:BAD]
            + [Record(0, BAD, bad.key, bad.value, swapped, bad.timestamp, bad.timestamp_type)]
            + source[BAD + 1 :]
        )
        return records, [r.offset for r in source]

    fabricate(config, source_bootstrap, destination_bootstrap, source_topic, reorder)
    _, mirror = verified(config, spark, source_topic)

    m = mirror.partitions[0].mismatch
    assert (m.source_offset, m.reason) == (BAD, "headers differs")
    assert m.source.header_names == ("first", "second", "first")
    assert m.mirror.header_names == ("second", "first", "first")


# --- options and the command line -------------------------------------------------------------


def test_a_sample_verifies_fewer_records_and_bounds_are_source_offsets(
    config, spark, source_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, [{"value": b"%d" % i, "partition": 0} for i in range(30000)])
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    _, full = verified(config, spark, topic)
    _, sampled = verified(config, spark, topic, sample=0.34)
    _, bounded = verified(config, spark, topic, from_offset=100, until_offset=7100, max_bytes_per_second=10_000_000)

    assert full.source_records == 30000 and full.partitions[0].ranges_checked == 6
    assert sampled.identical, sampled.problem()
    assert sampled.partitions[0].ranges_checked == 2
    assert sampled.source_records == 10000
    assert bounded.identical, bounded.problem()
    assert bounded.source_records == 7000
    assert (bounded.partitions[0].source_from, bounded.partitions[0].source_until) == (100, 7100)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_the_command_exits_1_naming_the_mirror_partition_and_offset(
    write_config, config, spark, source_bootstrap, destination_bootstrap, source_topic
):
    def flip(source):
        bad = source[BAD]
        records = (
            source[:BAD]
            + [Record(0, BAD, bad.key, b"X" + bad.value[1:], bad.headers, bad.timestamp, bad.timestamp_type)]
            + source[BAD + 1 :]
        )
        return records, [r.offset for r in source]

    fabricate(config, source_bootstrap, destination_bootstrap, source_topic, flip)
    path = str(write_config())

    text = invoke("mirror", "verify", source_topic, "--link", LINK, "--config", path)
    as_json = invoke("mirror", "verify", source_topic, "--link", LINK, "--config", path, "--json", "--from", "7000")

    assert text.exit_code == 1
    assert text.stderr.strip() == (
        f"error: mirror '{source_topic}' partition 0: first difference at source offset "
        f"{BAD} (mirror offset {BAD}): value differs"
    )
    assert "DIFFERENT" in text.stdout and "value-" not in text.stdout
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["identical"] is False
    assert f"source offset {BAD}" in json.loads(as_json.stderr)["error"]


def test_the_command_exits_0_on_an_identical_mirror(
    write_config, config, spark, source_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, rich_records(50, 2))
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])

    result = invoke("mirror", "verify", topic, "--link", LINK, "--config", str(write_config()), "--json")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["mirrors"][topic]["identical"] is True


def test_a_bad_link_or_topic_exits_1_with_one_clear_line(
    write_config, config, spark, source_bootstrap, create_topic, unique_name, admin
):
    path = str(write_config())
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    engine.create_mirror(config, LINK, topic)

    bad_link = invoke("mirror", "verify", topic, "--link", "nope", "--config", path)
    bad_topic = invoke("mirror", "verify", "no-such-mirror", "--link", LINK, "--config", path)
    admin(source_bootstrap).delete_topics([topic])[topic].result()
    time.sleep(1)
    gone = invoke("mirror", "verify", topic, "--link", LINK, "--config", path)

    assert bad_link.exit_code == 1 and bad_link.stderr.startswith("error: --link: no link 'nope'")
    assert bad_topic.exit_code == 1 and "no mirror 'no-such-mirror' on link 'west-to-east'" in bad_topic.stderr
    assert gone.exit_code == 1
    assert gone.stderr.strip() == (
        f"error: mirror '{topic}': its source topic '{topic}' does not exist on cluster "
        f"'us-west'; there is nothing to verify it against"
    )
    for r in (bad_link, bad_topic, gone):
        assert len(r.stderr.strip().splitlines()) == 1
    with pytest.raises(MirrorRefused):
        engine.verify_mirrors(config, LINK, spark, ["no-such-mirror"])
    # Verifying a whole link skips (and names) the mirror that cannot be compared, and verifies the others.
    whole = engine.verify_mirrors(config, LINK, spark, sample=0.01)
    assert "does not exist" in whole.skipped[topic] and len(whole.mirrors) > 1


# --- records the link did not write (R-MT-9) --------------------------------------------------


def test_a_record_produced_straight_to_the_mirror_is_a_difference_then_a_flag(
    write_config, config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=2)
    produce(source_bootstrap, topic, rich_records(30, 2))
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    assert_identical(verified(config, spark, topic)[1], 30)
    path = str(write_config())
    # A producer on the destination without an authorizer in its way: one record at partition 1's tail.
    produce(destination_bootstrap, topic, [{"key": b"intruder", "value": b"not-from-the-link", "partition": 1}])

    result, mirror = verified(config, spark, topic)
    _, bounded = verified(config, spark, topic, until_offset=5, sample=0.5)
    text = invoke("mirror", "verify", topic, "--link", LINK, "--config", path)

    # The common range is still identical record for record; the tail is what differs.
    assert not result.identical and not mirror.identical
    assert [p.mismatch for p in mirror.partitions] == [None, None]
    assert mirror.source_records == 30
    first, second = mirror.partitions
    assert first.identical and first.foreign_records == 0
    assert (second.foreign_from, second.foreign_until, second.foreign_records) == (15, 16, 1)
    assert mirror.problem() == (
        f"mirror '{topic}' partition 1: 1 record the link did not write at mirror offset "
        f"15, past the end of its offset map"
    )
    assert not bounded.identical and bounded.partitions[1].foreign_records == 1  # whatever range is compared
    assert text.exit_code == 1
    assert "identical" not in text.stdout.splitlines()[0] and "DIFFERENT" in text.stdout
    assert "mirror offset 15" in text.stdout and "not-from-the-link" not in text.stdout + text.stderr
    assert text.stderr.strip() == f"error: {mirror.problem()}"

    # The next cycle flags the mirror; verify shows the flag, and says why.
    with pytest.raises(engine.CycleFailed, match="did not write"):
        engine.run_cycle(config, LINK, spark, mirrors=[topic])
    _, flagged = verified(config, spark, topic)
    text = invoke("mirror", "verify", topic, "--link", LINK, "--config", path)
    as_json = invoke("mirror", "verify", topic, "--link", LINK, "--config", path, "--json")

    assert flagged.flags == ("FOREIGN_WRITE",) and "did not write" in flagged.state_reason
    assert not flagged.identical and flagged.partitions[1].foreign_records == 1
    assert text.exit_code == 1
    assert f"{topic}: flagged FOREIGN_WRITE: " in text.stdout
    assert text.stderr.strip().endswith("(flagged FOREIGN_WRITE)")
    assert as_json.exit_code == 1
    body = json.loads(as_json.stdout)
    assert body["identical"] is False and body["verdict"] == "different"
    assert body["flagged"] == {topic: ["FOREIGN_WRITE"]}
    shown = body["mirrors"][topic]
    assert shown["flags"] == ["FOREIGN_WRITE"] and shown["foreign_records"] == 1
    assert (shown["partitions"][1]["foreign_from"], shown["partitions"][1]["foreign_until"]) == (15, 16)
    assert "mirror offset 15" in json.loads(as_json.stderr)["error"]


def test_a_record_produced_to_a_mirror_before_its_first_cycle_is_found(
    config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, rich_records(10))
    engine.create_mirror(config, LINK, topic)
    produce(destination_bootstrap, topic, [{"value": b"early", "partition": 0}] * 2)

    _, mirror = verified(config, spark, topic)

    p = mirror.partitions[0]
    assert not mirror.identical and p.note == "nothing mirrored yet"
    assert (p.foreign_from, p.foreign_until) == (0, 2)
    assert mirror.problem() == (
        f"mirror '{topic}' partition 0: 2 records the link did not write at mirror offsets "
        f"0..1, past the end of its offset map"
    )


def test_a_flagged_stopped_mirror_is_not_called_identical(
    write_config, config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, rich_records(20))
    engine.create_mirror(config, LINK, topic)
    engine.run_cycle(config, LINK, spark, mirrors=[topic])
    produce(destination_bootstrap, topic, [{"value": b"foreign", "partition": 0}])
    with pytest.raises(engine.CycleFailed, match="did not write"):
        engine.run_cycle(config, LINK, spark, mirrors=[topic])
    engine.failover(config, LINK, [topic])  # a stopped topic's records past its map are its own, not foreign ...

    _, mirror = verified(config, spark, topic)
    text = invoke("mirror", "verify", topic, "--link", LINK, "--config", str(write_config()))

    # ... so the common range compares identical and no tail is reported, but the flag the cycle set stays.
    assert mirror.state == "STOPPED" and mirror.flags == ("FOREIGN_WRITE",)
    assert mirror.partitions[0].identical and mirror.partitions[0].foreign_records == 0
    assert not mirror.identical
    assert mirror.problem().startswith(f"mirror '{topic}' is flagged FOREIGN_WRITE: ")
    assert text.exit_code == 1 and text.stdout.startswith(f"link '{LINK}': FLAGGED: ")


# --- the Dagster check ------------------------------------------------------------------------


def run_verify_job(config_path, job: str, check_config: dict | None = None):
    import dagster as dg

    from mirror_pipeline_dagster.definitions import build_definitions

    defs = build_definitions(config_path)
    run_config = {"ops": {"west_to_east_mirror_verified": {"config": check_config}}} if check_config else None
    result = defs.resolve_job_def(job).execute_in_process(
        run_config=run_config, raise_on_error=False, instance=dg.DagsterInstance.ephemeral()
    )
    (evaluation,) = [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    return evaluation


def test_the_dagster_check_passes_and_fails_naming_the_first_bad_offset(
    write_config, config, spark, source_bootstrap, destination_bootstrap, source_topic, create_topic, unique_name
):
    good = create_topic(source_bootstrap, unique_name("good"), partitions=2)
    produce(source_bootstrap, good, rich_records(60, 2))
    engine.create_mirror(config, LINK, good)
    engine.run_cycle(config, LINK, spark, mirrors=[good])
    path = write_config()

    # Other tests' mirrors share the link (some corrupted on purpose): the sampled run names this one.
    sampled = run_verify_job(path, "west_to_east_verify", {"mirrors": [good]})

    assert sampled.passed
    assert sampled.metadata["results"].value[good]["identical"] is True

    def flip(source):
        bad = source[BAD]
        records = (
            source[:BAD]
            + [Record(0, BAD, bad.key, bad.value[:-1] + b"!", bad.headers, bad.timestamp, bad.timestamp_type)]
            + source[BAD + 1 :]
        )
        return records, [r.offset for r in source]

    fabricate(config, source_bootstrap, destination_bootstrap, source_topic, flip)
    full = run_verify_job(path, "west_to_east_verify_full")  # every mirror of the link, as the job is configured

    assert not full.passed
    assert full.metadata["sample"].value == 1.0
    assert full.metadata["results"].value[source_topic]["first_bad_offset"] == f"partition 0 offset {BAD}"
    assert f"first difference at source offset {BAD}" in full.description


def test_a_replicate_run_copies_without_verifying(
    write_config, config, spark, source_bootstrap, create_topic, unique_name
):
    import dagster as dg

    from mirror_pipeline_dagster.definitions import build_definitions

    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    produce(source_bootstrap, topic, rich_records(20))
    engine.create_mirror(config, LINK, topic)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("west_to_east_mirrors", [topic])

    job = build_definitions(write_config()).resolve_job_def("west_to_east_replicate")
    result = job.execute_in_process(instance=instance, partition_key=topic)

    assert result.success
    evaluated = {
        e.asset_check_evaluation_data.check_name
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    }
    assert "mirror_verified" not in evaluated and "lag_under_threshold" in evaluated
