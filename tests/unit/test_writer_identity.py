"""Writer identities: a mirror partition always maps to the same writer slot, a link's slots
are its own, and a mirror's partitions spread over distinct slots."""

from __future__ import annotations

from mirror_pipeline.config.setting_values import DEFAULT_WRITER_SLOTS as WRITER_SLOTS
from mirror_pipeline.link.state_keys import LEGACY_WRITER_SLOTS, slot_transactional_id, writer_slot
from mirror_pipeline.link.state_store import state_writer_id, transactional_id


def test_links_never_share_an_identity():
    assert slot_transactional_id("a", 1) != slot_transactional_id("a.b", 1)
    assert slot_transactional_id("a", 11) != slot_transactional_id("a", 1)


def test_a_partition_always_maps_to_the_same_slot():
    # The mapping may never change under a link: only a writer of the same identity fences a zombie.
    assert writer_slot("orders", 3, WRITER_SLOTS) == writer_slot("orders", 3, WRITER_SLOTS)
    assert [writer_slot("orders", p, WRITER_SLOTS) for p in range(3)] == [
        (writer_slot("orders", 0, WRITER_SLOTS) + p) % WRITER_SLOTS for p in range(3)
    ]
    assert transactional_id("l", "orders", 3, WRITER_SLOTS) == slot_transactional_id(
        "l", writer_slot("orders", 3, WRITER_SLOTS)
    )


def test_a_mirrors_partitions_take_distinct_slots_up_to_the_slot_count():
    assert len({writer_slot("orders", p, WRITER_SLOTS) for p in range(WRITER_SLOTS)}) == WRITER_SLOTS
    assert {writer_slot(f"t{i}", p, WRITER_SLOTS) for i in range(200) for p in range(10)} == set(range(WRITER_SLOTS))


def test_segment_writers_and_the_state_writer_differ():
    assert all(slot_transactional_id("l", s) != state_writer_id("l") for s in range(WRITER_SLOTS))


def test_a_link_of_fewer_slots_deals_its_partitions_to_those_only():
    for slots in (1, 4, 16):
        assert {writer_slot(f"t{i}", p, slots) for i in range(50) for p in range(10)} == set(range(slots))
        assert len({writer_slot("orders", p, slots) for p in range(slots)}) == slots


def test_the_default_count_keeps_the_mapping_links_were_written_under():
    # Links whose record predates `mirror.writer.slots` were written under 64 slots with this mapping.
    assert LEGACY_WRITER_SLOTS == 64
    assert [writer_slot("orders", p, 64) for p in range(3)] == [(3845127662 + p) % 64 for p in range(3)]
