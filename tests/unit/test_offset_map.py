"""The offset map: run-length segments, crash clipping, translation, consolidation (R-MT-6, R-OFS-2)."""

from __future__ import annotations

from mirror_pipeline.model.offset_map import OffsetMap, Run, Segment, consolidate, pack, resolve, runs_of


def seg(dest_start, runs, source_end, padding=0):
    return Segment(dest_start, tuple(runs), source_end, padding)


def test_runs_of_encodes_consecutive_offsets_once():
    assert runs_of([]) == []
    assert runs_of([5, 6, 7, 10, 12, 13]) == [(5, 3), (10, 1), (12, 2)]


def test_gap_free_partition_is_one_identity_run():
    res = resolve([seg(0, [(0, 100)], 100), seg(100, [(100, 50)], 150)], mirror_log_end=150)
    assert res.offset_map.runs == (Run(0, 0, 150),)
    assert res.offset_map.offsets_preserved
    assert res.offset_map.next_source_offset == 150
    assert res.in_doubt == () and res.foreign_records == 0


def test_gapped_partition_maps_each_record_exactly():
    # Source offsets 0-2, a transaction marker at 3, 4-5, aborted 6-9, then 10.
    res = resolve([seg(0, [(0, 3), (4, 2)], 6), seg(5, [(10, 1)], 12)], mirror_log_end=6)
    omap = res.offset_map
    assert [omap.dest_of(o) for o in (0, 1, 2, 4, 5, 10)] == [0, 1, 2, 3, 4, 5]
    assert omap.dest_of(3) is None and omap.dest_of(7) is None
    assert not omap.offsets_preserved
    assert omap.next_source_offset == 12  # past the trailing gap too


def test_translate_lands_on_next_copied_record_or_log_end():
    omap = resolve([seg(0, [(0, 3), (4, 2)], 8)], mirror_log_end=5).offset_map
    assert omap.translate(0) == 0
    assert omap.translate(3) == 3  # a position inside a gap: the next record, source 4
    assert omap.translate(5) == 4
    assert omap.translate(6) == 5  # past everything copied: the mirror's end
    assert omap.translate(1_000) == 5


def test_segment_above_log_end_is_in_doubt_and_truncates_to_what_landed():
    landed = seg(0, [(0, 10)], 10)
    partial = seg(10, [(10, 5), (20, 5)], 30)
    res = resolve([landed, partial], mirror_log_end=13)
    assert res.in_doubt == (partial,)
    assert res.offset_map.next_source_offset == 10
    cut = partial.truncated(13)
    assert cut.runs == ((10, 3),) and cut.source_end == 13
    assert partial.truncated(17) == Segment(10, ((10, 5), (20, 2)), 22)
    assert partial.truncated(10) is None
    assert partial.truncated(20) == partial


def test_nothing_landed_of_a_pipelined_segment_pair():
    a, b = seg(0, [(0, 10)], 10), seg(10, [(10, 10)], 20)
    res = resolve([a, b], mirror_log_end=4)
    assert res.in_doubt == (a, b)
    assert a.truncated(4).source_end == 4 and b.truncated(4) is None


def test_records_beyond_every_segment_are_foreign():
    res = resolve([seg(0, [(0, 10)], 10)], mirror_log_end=12)
    assert res.foreign_records == 2
    assert resolve([], mirror_log_end=3).foreign_records == 3


def test_padding_aligns_log_start_and_preserves_offsets():
    res = resolve([seg(0, [], 40, padding=40), seg(40, [(40, 60)], 100)], mirror_log_end=100)
    assert res.offset_map.runs == (Run(40, 40, 60),)
    assert res.offset_map.offsets_preserved
    # An unfinished alignment is finished, never rolled back.
    pad = seg(0, [], 40, padding=40)
    assert pad.truncated(25) == pad


def test_empty_segment_records_progress_through_a_trailing_gap():
    res = resolve([seg(0, [(0, 5)], 5), seg(5, [], 7)], mirror_log_end=5)
    assert res.offset_map.next_source_offset == 7
    assert res.in_doubt == ()


def test_consolidated_segment_supersedes_its_parts_even_before_they_are_deleted():
    parts = [seg(0, [(0, 10)], 10), seg(10, [(12, 10)], 22), seg(20, [], 25)]
    [merged] = consolidate(parts)
    assert merged == Segment(0, ((0, 10), (12, 10)), 25)
    for present in (parts + [merged], [merged] + parts[1:], [merged, parts[2]]):
        res = resolve(present, mirror_log_end=20)
        assert res.offset_map.runs == (Run(0, 0, 10), Run(12, 10, 10))
        assert res.offset_map.next_source_offset == 25
        assert res.in_doubt == ()
    later = seg(20, [(25, 5)], 30)
    assert resolve([merged, *parts, later], mirror_log_end=25).offset_map.next_source_offset == 30


def test_consolidation_packs_a_partition_with_many_holes_into_segments_under_the_message_limit():
    # A compacted partition with a hole after every record: 250 chunks of 2,000 one-record runs.
    parts = [seg(2000 * c, [(4000 * c + 2 * i, 1) for i in range(2000)], 4000 * (c + 1)) for c in range(250)]
    packed = consolidate(parts)
    assert len(packed) == 25 and all(len(s.runs) <= 20_000 for s in packed)
    assert max(len(s.to_json()) for s in packed) < 1_000_000  # Kafka's default max.message.bytes
    assert [s.dest_start for s in packed] == [20_000 * i for i in range(25)]
    res = resolve(packed + parts[:3], mirror_log_end=500_000)
    assert res.offset_map == resolve(parts, mirror_log_end=500_000).offset_map
    assert res.offset_map.next_source_offset == 1_000_000
    assert consolidate(packed) == packed  # nothing more to pack: the cycle leaves them alone


def test_map_is_compact_one_entry_per_run_not_per_record():
    # 10,000 records with a hole every 1,000: ten runs.
    offsets = [o for o in range(10_010) if o % 1001 != 1000]
    segments, dest = [], 0
    for i in range(0, len(offsets), 2500):
        chunk = offsets[i : i + 2500]
        segments.append(Segment(dest, tuple(runs_of(chunk)), chunk[-1] + 1))
        dest += len(chunk)
    omap = resolve(segments, mirror_log_end=dest).offset_map
    assert len(omap.runs) == 10
    assert all(omap.dest_of(o) == i for i, o in enumerate(offsets))


def test_segment_wire_format_round_trips():
    s = Segment(7, ((10, 3), (20, 1)), 25, padding=0, written_at=12.5)
    assert Segment.from_json(s.to_json()) == s
    p = Segment(0, (), 40, padding=40)
    assert Segment.from_json(p.to_json()) == p


def test_empty_map_translates_to_log_end():
    assert OffsetMap().translate(5) == 0


def test_pack_names_exactly_the_parts_a_packed_segment_replaces():
    parts = [Segment(0, ((0, 5),), 5), Segment(5, ((5, 5),), 10), Segment(10, ((12, 3),), 15)]
    packed, stale = pack(parts)
    assert packed == consolidate(parts) and [s.dest_start for s in packed] == [0]
    assert stale == [5, 10]
    packed, stale = pack(parts, max_runs=1)  # each part alone: nothing replaced
    assert stale == [] and len(packed) == 3
