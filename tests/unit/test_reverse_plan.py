"""The reverse's per-partition decision (R-LC-7), without Kafka."""

from mirror_pipeline.model.offset_map import OffsetMap, Run
from mirror_pipeline.model.reverse_plan import (
    CONTINUE,
    REBUILD,
    PartitionFacts,
    PartitionReverse,
    decide_partition,
    first_still_held,
    identity_over,
    topic_action,
)


def preserved(start: int, end: int) -> OffsetMap:
    return OffsetMap.from_runs([Run(start, start, end - start)], end, end)


def facts(a0=0, a_end=100, mirrored=100, b0=0, b_end=150, partition=0) -> PartitionFacts:
    return PartitionFacts(partition, a0, a_end, mirrored, b0, b_end)


def test_a_planned_promote_at_zero_lag_continues_in_place_with_nothing_saved():
    decision = decide_partition(facts(), preserved(0, 100))
    assert (decision.action, decision.mirrored_up_to, decision.saved_ranges) == (CONTINUE, 100, ())


def test_a_divergent_tail_rebuilds_and_saves_exactly_the_tail():
    decision = decide_partition(facts(a_end=130), preserved(0, 100))
    assert decision.action == REBUILD
    assert decision.saved_ranges == ((100, 130),)
    assert "divergent tail" in decision.reason


def test_a_translated_map_rebuilds_but_saves_nothing_the_new_source_still_holds():
    # Transaction markers on the old source: its records landed one offset lower each time.
    omap = OffsetMap.from_runs([Run(0, 0, 10), Run(11, 10, 10)], 21, 20)
    decision = decide_partition(facts(a_end=21, mirrored=21, b_end=40), omap)
    assert (decision.action, decision.saved_ranges) == (REBUILD, ())


def test_records_the_new_source_already_expired_are_saved_before_a_rebuild():
    decision = decide_partition(facts(a_end=120, b0=60), preserved(0, 100))
    assert decision.saved_ranges == ((0, 60), (100, 120))


def test_the_old_source_own_retention_is_respected():
    decision = decide_partition(facts(a0=80, a_end=100), preserved(0, 100))
    assert decision.action == CONTINUE


def test_a_partition_the_new_source_lacks_is_saved_whole():
    decision = decide_partition(PartitionFacts(3, 5, 50, None, None, None), None)
    assert (decision.action, decision.saved_ranges) == (REBUILD, ((5, 50),))


def test_an_empty_old_partition_continues():
    assert decide_partition(facts(a_end=0, mirrored=0, b_end=10), None).action == CONTINUE


def test_one_rebuilt_partition_rebuilds_the_topic():
    keep = PartitionReverse(0, CONTINUE, "", 10, 0, 10)
    rebuild = PartitionReverse(1, REBUILD, "", 10, 0, 12, ((10, 12),))
    assert topic_action([keep, keep]) == CONTINUE
    assert topic_action([keep, rebuild]) == REBUILD


def test_identity_needs_every_offset_in_place():
    assert identity_over(preserved(0, 100), 20, 100)
    assert not identity_over(preserved(10, 100), 0, 100)  # offsets 0..9 never reached the mirror
    assert not identity_over(OffsetMap.from_runs([Run(0, 0, 50), Run(51, 50, 49)], 100, 99), 0, 100)
    assert identity_over(None, 5, 5)


def test_first_still_held_follows_the_map_past_the_mirror_log_start():
    omap = OffsetMap.from_runs([Run(0, 0, 10), Run(12, 10, 10)], 22, 20)
    assert first_still_held(omap, 0, 22, 0) == 0
    assert first_still_held(omap, 0, 22, 15) == 17
    assert first_still_held(omap, 0, 22, 20) == 22


def test_a_decision_survives_its_record():
    decision = decide_partition(facts(a_end=130, b0=10), preserved(0, 100))
    assert PartitionReverse.from_dict(decision.to_dict()) == decision
