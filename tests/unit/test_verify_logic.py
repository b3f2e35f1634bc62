"""The pure logic of `verify` (R-REL-4): ranges, checksums, narrowing, sampling, throttle. No Kafka."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import pytest

from mirror_pipeline.cli.verify import render_verify
from mirror_pipeline.model.errors import ConfigError
from mirror_pipeline.verification import ranges
from mirror_pipeline.verification.checksum import LOG_APPEND_TIME, SideChecksum
from mirror_pipeline.verification.compare import first_difference
from mirror_pipeline.verification.planner import VerifyOptions
from mirror_pipeline.verification.ranges import RunIndex
from mirror_pipeline.verification.results import MirrorVerify, PartitionVerify, VerifyResult
from mirror_pipeline.verification.throttle import TokenBucket, per_task_rate


@dataclass
class Rec:
    """A record with the interface of confluent-kafka's Message (plain data, no Kafka)."""

    off: int
    k: bytes | None = b"k"
    v: bytes | None = b"v"
    hs: list | None = None
    ts: int = 1000
    ts_type: int = 1

    def offset(self):
        return self.off

    def key(self):
        return self.k

    def value(self):
        return self.v

    def headers(self):
        return self.hs

    def timestamp(self):
        return self.ts_type, self.ts


def at(offset: int, like: Rec) -> Rec:
    return Rec(offset, like.k, like.v, like.hs, like.ts, like.ts_type)


def source_records(offsets) -> list[Rec]:
    return [Rec(o, b"k%d" % o, b"value-%d" % o, [("h", b"\x00\xff"), ("h", b"")], 1000 + o) for o in offsets]


def mirrored(source: list[Rec], index: RunIndex) -> list[Rec]:
    return [at(index.mirror_of(r.off), r) for r in source]


def digest(records, runs, on_source) -> str:
    side = SideChecksum(runs, on_source)
    side.update(records[: len(records) // 2])  # fed in two batches, as consume() hands them out
    side.update(records[len(records) // 2 :])
    return side.hexdigest()


# A partition with a compaction hole at 3..4 and transaction markers at 8: three runs.
GAPPED = RunIndex(((0, 0, 3), (5, 3, 3), (9, 6, 4)), source_end=14, mirror_end=10)
GAPPED_OFFSETS = [0, 1, 2, 5, 6, 7, 9, 10, 11, 12]


# --- the offset map, both ways ---------------------------------------------------------------


def test_run_index_maps_both_ways_and_positions_land_on_the_next_record():
    assert [GAPPED.mirror_of(o) for o in range(14)] == [0, 1, 2, None, None, 3, 4, 5, None, 6, 7, 8, 9, None]
    assert [GAPPED.source_of(d) for d in range(11)] == GAPPED_OFFSETS + [None]
    assert GAPPED.mirror_position(3) == 3 and GAPPED.mirror_position(8) == 6 and GAPPED.mirror_position(13) == 10
    assert GAPPED.source_position(3) == 5 and GAPPED.source_position(10) == 14


def test_clipped_runs_cover_only_the_asked_range():
    assert GAPPED.clipped(1, 10) == ((1, 1, 2), (5, 3, 3), (9, 6, 1))
    assert GAPPED.clipped(3, 5) == ()


def test_common_range_is_what_both_sides_still_hold():
    aligned = RunIndex(((40, 40, 60),), source_end=100, mirror_end=100)  # padding 0..39 stands for nothing
    assert ranges.common_range(aligned, source_start=40, source_end=100, mirror_start=40) == (40, 100)
    # Retention moved the source's start; the source grew past what was mirrored.
    assert ranges.common_range(aligned, source_start=55, source_end=130, mirror_start=40) == (55, 100)
    # Retention on the mirror.
    assert ranges.common_range(aligned, source_start=40, source_end=100, mirror_start=70) == (70, 100)
    # Bounds asked for.
    assert ranges.common_range(aligned, 40, 100, 40, from_offset=50, until_offset=60) == (50, 60)
    assert ranges.common_range(aligned, 40, 100, 40, from_offset=120) == (120, 120)


def test_a_stopped_mirror_is_compared_up_to_where_its_map_ends():
    stopped = RunIndex(((0, 0, 500),), source_end=500, mirror_end=500)
    # The source went on to 800 and the topic took writes after the stop: neither counts.
    assert ranges.common_range(stopped, source_start=0, source_end=800, mirror_start=0) == (0, 500)


def test_blocks_are_cut_at_fixed_multiples():
    assert ranges.blocks(3, 12, size=5) == [(3, 5), (5, 10), (10, 12)]
    assert ranges.blocks(7, 7, size=5) == []


# --- sampling ---------------------------------------------------------------------------------


def test_sampling_is_deterministic_spread_and_never_empty():
    every = ranges.blocks(0, 100_000, size=1000)
    sample = ranges.sample_blocks(every, 0.1, "orders/0/")
    assert len(sample) == 10
    assert sample == ranges.sample_blocks(every, 0.1, "orders/0/")
    gaps = [b[0] - a[0] for a, b in pairwise(sample)]
    assert max(gaps) - min(gaps) <= 1000  # evenly spread, not bunched
    assert ranges.sample_blocks(every, 0.1, "orders/0/day-2") != sample  # another seed, other blocks
    assert len(ranges.sample_blocks(every[:3], 0.01, "x")) == 1
    assert ranges.sample_blocks(every, 1.0, "x") == every


def test_tasks_split_partitions_only_to_fill_the_slots():
    assert ranges.split_evenly([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert ranges.split_evenly([1], 4) == [[1]]
    assert ranges.pieces_per_partition(partitions=1, task_slots=4) == 4
    assert ranges.pieces_per_partition(partitions=8, task_slots=2) == 1


# --- checksums --------------------------------------------------------------------------------


def test_identical_sides_have_equal_checksums_through_a_gapped_map():
    src = source_records(GAPPED_OFFSETS)
    assert digest(src, GAPPED.runs, True) == digest(mirrored(src, GAPPED), GAPPED.runs, False)


@pytest.mark.parametrize("change", ["flip", "headers", "null", "timestamp", "type", "place", "drop"])
def test_any_change_changes_the_checksum(change):
    src = source_records(GAPPED_OFFSETS)
    mir = mirrored(src, GAPPED)
    r = mir[4]
    if change == "flip":
        r.v = bytes([r.v[0] ^ 1]) + r.v[1:]
    elif change == "headers":
        r.hs = list(reversed(r.hs))
    elif change == "null":
        r.v = None
    elif change == "timestamp":
        r.ts += 1
    elif change == "type":
        r.ts_type = LOG_APPEND_TIME
    elif change == "place":
        mir[4], mir[5] = at(mir[4].off, mir[5]), at(mir[5].off, mir[4])
    else:
        del mir[4]
    assert digest(src, GAPPED.runs, True) != digest(mir, GAPPED.runs, False)


def test_empty_and_null_values_are_told_apart():
    a, b = [Rec(0, k=None, v=b"")], [Rec(0, k=b"", v=None)]
    runs = ((0, 0, 1),)
    assert digest(a, runs, True) != digest(b, runs, True)


def test_a_log_append_time_source_matches_its_create_time_mirror():
    # R-CS-5: the mirror holds LogAppendTime back and keeps the source's timestamps as CreateTime.
    src = [Rec(0, ts_type=LOG_APPEND_TIME)]
    assert digest(src, ((0, 0, 1),), True) == digest([Rec(0, ts_type=1)], ((0, 0, 1),), False)


# --- narrowing --------------------------------------------------------------------------------


def test_narrowing_names_a_flipped_byte_at_its_source_offset():
    src = source_records(GAPPED_OFFSETS)
    mir = mirrored(src, GAPPED)
    mir[5].v = mir[5].v[:-1] + b"X"
    found = first_difference(src, mir, GAPPED).mismatch
    assert (found.source_offset, found.mirror_offset, found.reason) == (7, 5, "value differs")
    assert found.source.value_length == found.mirror.value_length
    assert found.source.digest != found.mirror.digest
    assert found.source.header_names == ("h", "h")


def test_narrowing_names_reordered_headers():
    src = source_records(range(5))
    mir = [at(r.off, r) for r in src]
    mir[2].hs = list(reversed(mir[2].hs))
    found = first_difference(src, mir, RunIndex(((0, 0, 5),), 5, 5)).mismatch
    assert (found.source_offset, found.reason) == (2, "headers differs")


def test_narrowing_names_a_duplicate_and_a_missing_record():
    index = RunIndex(((0, 0, 6),), 6, 6)
    src = source_records(range(6))
    duplicated = [at(o, src[min(o, 3) if o <= 3 else o - 1]) for o in range(6)]
    dup = first_difference(src, duplicated, index).mismatch
    assert (dup.source_offset, dup.reason) == (4, "the mirror holds a duplicate of source offset 3 here")
    gap = RunIndex(((0, 0, 2), (3, 2, 3)), 6, 5)  # the map skips source offset 2, which the source still has
    missing = first_difference(src, [at(gap.mirror_of(r.off), r) for r in src if r.off != 2], gap).mismatch
    assert (missing.source_offset, missing.mirror_offset, missing.mirror) == (2, None, None)
    assert missing.reason.startswith("missing on the mirror")


def test_a_record_only_the_mirror_has_is_named():
    index = RunIndex(((0, 0, 3),), 3, 3)
    src = source_records([0, 2])
    mir = mirrored(source_records([0, 1, 2]), index)
    found = first_difference(src, mir, index).mismatch
    assert (found.source_offset, found.source) == (1, None)
    assert found.reason.startswith("missing on the source")


def test_compaction_on_one_side_is_forgiven_only_for_absences():
    index = RunIndex(((0, 0, 6),), 6, 6)
    src = source_records([0, 1, 3, 5])  # the source's cleaner removed 2 and 4 after the copy
    mir = mirrored(source_records(range(6)), index)
    ok = first_difference(src, mir, index, compacted=True)
    assert ok.mismatch is None and ok.compacted_away == 2
    mir[3].v = b"changed"
    assert first_difference(src, mir, index, compacted=True).mismatch.source_offset == 3


def test_results_name_the_first_bad_offset_and_hold_no_payload():
    src = source_records(range(3))
    mir = [at(r.off, r) for r in src]
    mir[1].v = b"secret-payload-changed"
    mismatch = first_difference(src, mir, RunIndex(((0, 0, 3),), 3, 3)).mismatch
    part = PartitionVerify(2, 0, 3, 0, 3, 1, 1, 3, 3, 100, mismatch=mismatch)
    result = VerifyResult("l", 0.0, 1.0, 1.0, None, None, None, 1, {"t": MirrorVerify("t", "t", "ACTIVE", (part,))})
    assert not result.identical
    assert result.problems() == [
        "mirror 't' partition 2: first difference at source offset 1 (mirror offset 1): value differs"
    ]
    text = repr(result.to_dict())
    assert "secret-payload" not in text and "value-1" not in text


# --- records the link did not write, and flags (R-MT-9) ---------------------------------------


def test_the_foreign_tail_is_what_lies_past_everything_the_link_wrote():
    assert ranges.foreign_tail(0, 100, stopped=False) == (100, 100)
    assert ranges.foreign_tail(1, 101, stopped=False) == (100, 101)
    assert ranges.foreign_tail(3, 3, stopped=False) == (0, 3)  # before the first cycle: all of it
    # A stopped mirror's topic past its map is its new producers': nothing foreign there.
    assert ranges.foreign_tail(7, 107, stopped=True) == (107, 107)


def partition(n: int, **changes) -> PartitionVerify:
    return PartitionVerify(n, 0, 15, 0, 15, 1, 1, 15, 15, 300, **changes)


def result_of(*mirrors: MirrorVerify) -> VerifyResult:
    return VerifyResult("l", 0.0, 1.0, 1.0, None, None, None, 1, {m.mirror_topic: m for m in mirrors})


def test_records_past_the_map_are_a_difference_named_with_their_offsets():
    one = partition(1, foreign_from=15, foreign_until=16)
    two = partition(0, foreign_from=15, foreign_until=17)
    assert not one.identical and one.foreign_records == 1
    assert (
        one.foreign_problem() == "1 record the link did not write at mirror offset 15, past the end of its offset map"
    )
    assert two.foreign_problem() == (
        "2 records the link did not write at mirror offsets 15..16, past the end of its offset map"
    )
    assert partition(0).foreign_problem() == "" and partition(0).identical
    mirror = MirrorVerify("t", "t", "ACTIVE", (partition(0), one))
    result = result_of(mirror)
    assert not result.identical and result.verdict == "different"
    assert result.problems() == [
        "mirror 't' partition 1: 1 record the link did not write at mirror offset 15, past the end of its offset map"
    ]
    d = result.to_dict()
    assert d["mirrors"]["t"]["foreign_records"] == 1
    assert (
        d["mirrors"]["t"]["partitions"][1]["foreign_from"],
        d["mirrors"]["t"]["partitions"][1]["foreign_until"],
    ) == (15, 16)


def test_a_difference_in_the_common_range_is_named_before_the_foreign_tail():
    src = source_records(range(3))
    mir = [at(r.off, r) for r in src]
    mir[2].v = b"changed"
    mismatch = first_difference(src, mir, RunIndex(((0, 0, 3),), 3, 3)).mismatch
    mirror = MirrorVerify(
        "t", "t", "ACTIVE", (partition(0, foreign_from=3, foreign_until=4), partition(1, mismatch=mismatch))
    )
    assert mirror.problem().startswith("mirror 't' partition 1: first difference at source offset 2")


def test_a_flagged_mirror_is_never_identical_and_its_flag_is_named():
    flagged = MirrorVerify(
        "t",
        "t",
        "ACTIVE",
        (partition(0),),
        flags=("FOREIGN_WRITE",),
        state_reason="mirror 't' partition 0 holds 1 records the link did not write",
    )
    result = result_of(flagged, MirrorVerify("u", "u", "ACTIVE", (partition(0),)))
    assert all(p.identical for p in flagged.partitions) and not flagged.identical
    assert not result.identical and result.verdict == "flagged"
    assert result.flagged == {"t": ["FOREIGN_WRITE"]}
    assert result.problems() == [
        "mirror 't' is flagged FOREIGN_WRITE: mirror 't' partition 0 holds 1 records the link did not write"
    ]
    d = result.to_dict()
    assert d["verdict"] == "flagged" and d["mirrors"]["t"]["flags"] == ["FOREIGN_WRITE"]
    assert d["mirrors"]["u"]["flags"] == [] and d["mirrors"]["u"]["identical"] is True
    # With a difference as well, the flag follows the difference; the verdict is the difference's.
    both = MirrorVerify(
        "t", "t", "ACTIVE", (partition(0, foreign_from=15, foreign_until=16),), flags=("FOREIGN_WRITE",)
    )
    assert result_of(both).verdict == "different"
    assert both.problem() == (
        "mirror 't' partition 0: 1 record the link did not write at mirror offset 15, past the "
        "end of its offset map (flagged FOREIGN_WRITE)"
    )


def test_a_mirror_skipped_as_a_whole_passes_only_without_a_flag():
    gone = MirrorVerify("t", "t", "ACTIVE", skipped="its source topic 't' does not exist")
    assert result_of(gone).identical and result_of(gone).problems() == []
    gone_flagged = MirrorVerify("t", "t", "ACTIVE", skipped="its source topic 't' does not exist", flags=("DELETING",))
    assert not result_of(gone_flagged).identical
    assert result_of(gone_flagged).problems() == [
        "not verified: its source topic 't' does not exist (flagged DELETING)"
    ]


def test_the_verify_text_shows_flags_offsets_and_the_verdict():
    foreign = result_of(
        MirrorVerify(
            "t",
            "t",
            "ACTIVE",
            (partition(0), partition(1, foreign_from=15, foreign_until=16)),
            flags=("FOREIGN_WRITE",),
            state_reason="holds 1 records the link did not write",
        )
    )
    text = render_verify(foreign.to_dict())
    assert text.splitlines()[0].startswith("link 'l': DIFFERENT: compared 30 records")
    assert "1 record the link did not write at mirror offset 15" in text
    assert "t: flagged FOREIGN_WRITE: holds 1 records the link did not write" in text
    only_flag = result_of(MirrorVerify("t", "t", "STOPPED", (partition(0),), flags=("FOREIGN_WRITE",)))
    assert render_verify(only_flag.to_dict()).startswith("link 'l': FLAGGED: ")
    assert "t: flagged FOREIGN_WRITE: no reason recorded" in render_verify(only_flag.to_dict())
    clean = result_of(MirrorVerify("t", "t", "ACTIVE", (partition(0),)))
    assert render_verify(clean.to_dict()).startswith("link 'l': identical: ") and clean.verdict == "identical"


# --- throttle and options ---------------------------------------------------------------------


def test_token_bucket_holds_the_average_rate():
    now = [0.0]
    bucket = TokenBucket(1000, burst=100, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    for _ in range(50):
        bucket.take(200)  # batches bigger than the burst are paid in debt
    assert now[0] == pytest.approx(50 * 200 / 1000 - 100 / 1000)
    assert per_task_rate(8_000_000, 4) == 2_000_000 and per_task_rate(None, 4) is None


@pytest.mark.parametrize(
    "options",
    [
        VerifyOptions(sample=0),
        VerifyOptions(sample=1.5),
        VerifyOptions(sample=float("nan")),
        VerifyOptions(from_offset=-1),
        VerifyOptions(from_offset=10, until_offset=10),
        VerifyOptions(max_bytes_per_second=-5),
    ],
)
def test_nonsense_options_are_refused_naming_the_option(options):
    with pytest.raises(ConfigError):
        options.check()
