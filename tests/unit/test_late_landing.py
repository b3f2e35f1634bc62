"""Which records past a partition's offset map are a chunk of the link's that landed late."""

from mirror_pipeline.model.offset_map import Segment, resolve
from mirror_pipeline.replication.late_landing import foreign_records_problem, late_chunk


def records(offsets, tag="r"):
    return [(offset, (b"k", f"{tag}{offset}".encode(), None, 1000 + offset)) for offset in offsets]


def source_as_mirror(source, first):
    """The source records as the link writes them: at consecutive mirror offsets from `first`."""
    return [(first + i, content) for i, (_, content) in enumerate(source)]


def test_the_source_records_that_follow_the_map_are_mapped():
    source = records(range(100, 105))
    segment = late_chunk(40, source_as_mirror(source, 40), source)
    assert segment is not None
    assert (segment.dest_start, segment.runs, segment.source_end) == (40, ((100, 5),), 105)
    # With the map before them, the partition is accounted for to its log end.
    mapped = resolve([Segment(0, ((60, 40),), 100), segment], 45)
    assert mapped.foreign_records == 0 and mapped.offset_map.dest_end == 45


def test_source_gaps_are_kept_in_the_runs():
    source = records([100, 101, 104, 105])  # 102 and 103: a transaction's marker and an aborted record
    segment = late_chunk(40, source_as_mirror(source, 40), source)
    assert segment is not None and segment.runs == ((100, 2), (104, 2)) and segment.source_end == 106


def test_only_as_many_source_records_as_landed_are_mapped():
    source = records(range(100, 110))
    segment = late_chunk(40, source_as_mirror(source[:3], 40), source)
    assert segment is not None and segment.runs == ((100, 3),) and segment.source_end == 103


def test_a_record_another_writer_wrote_is_not_mapped():
    source = records(range(100, 103))
    mirror = source_as_mirror(source, 40)
    mirror[1] = (41, (b"k", b"not from the link", None, 1101))
    assert late_chunk(40, mirror, source) is None


def test_older_records_written_again_are_not_mapped():
    source = records(range(100, 103))
    assert late_chunk(40, source_as_mirror(records(range(97, 100)), 40), source) is None


def test_a_hole_in_the_mirror_is_not_mapped():
    source = records(range(100, 103))
    mirror = source_as_mirror(source, 40)
    assert late_chunk(40, [mirror[0], (42, mirror[1][1])], source) is None


def test_more_records_than_the_source_has_are_not_mapped():
    source = records(range(100, 103))
    assert late_chunk(40, source_as_mirror(records(range(100, 104)), 40), source) is None


def test_nothing_past_the_map_maps_nothing():
    assert late_chunk(40, [], records(range(100, 103))) is None


def test_the_problem_names_the_partition_and_what_was_found():
    problem = foreign_records_problem("orders", 3, 2000, 30000)
    assert "mirror 'orders' partition 3 holds 2000 records the link did not write (log end 30000)" in problem
