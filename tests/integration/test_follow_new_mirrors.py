"""Follow mode takes a mirror the destination does not list yet soon after it is listed (`epoch_pace`).

A broker lists a new topic a moment after the controller made it; given a
thousand at once (auto-create on a wide link), the last of them tens of
seconds later. An epoch planned meanwhile leaves such a mirror out, and it
joins the next epoch: the epoch that left it out is cut short, so that the
mirror waits seconds, not a whole epoch. Here the destination's metadata
hides one new mirror's topic until the first epoch has been reported (as a
broker the controller has not told yet), on the real local pair.
"""

from __future__ import annotations

import threading

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.replication import epoch_pace
from tests.integration.conftest import LINK
from tests.integration.test_follow_hand_over import _Epochs
from tests.kafka_records import assert_identical, load_source, read_topic

EPOCH_S = 16.0
WAITING_EPOCH_S = 4.0  # the cut-short epochs', instead of the 20 s a wide link's broker needs
EPOCHS = 3
RECORDS = 50  # each mirror's source, over its two partitions


class _Hiding(_Epochs):
    """Hides `topic` from the destination's metadata until the first epoch is reported."""

    def __init__(self, stop: threading.Event, topic: str):
        super().__init__(stop, EPOCHS)
        self.topic, self.hidden = topic, True

    def epoch(self, epoch) -> None:
        self.hidden = False
        super().epoch(epoch)


def test_an_epoch_that_left_out_a_mirror_not_listed_yet_is_cut_short_and_the_next_copies_it(
    write_config, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, monkeypatch
):
    config = load_config(write_config({}))
    listed, late = unique_name(), unique_name()
    for topic in (listed, late):
        create_topic(source_bootstrap, topic, partitions=2)
        load_source(source_bootstrap, topic, records=RECORDS, partitions=2)
        engine.create_mirror(config, LINK, topic)
    stop = threading.Event()
    report = _Hiding(stop, late)
    dest_alias = LinkContext.open(config, LINK).dest.alias
    partition_counts, topic_partitions = kc.partition_counts, kc.topic_partitions

    def counts(admin, alias, *args, **kwargs):
        found = partition_counts(admin, alias, *args, **kwargs)
        if alias == dest_alias and report.hidden:
            found.pop(late, None)
        return found

    def count_of(admin, topic, alias, *args, **kwargs):
        hidden = alias == dest_alias and topic == late and report.hidden
        return None if hidden else topic_partitions(admin, topic, alias, *args, **kwargs)

    monkeypatch.setattr(kc, "partition_counts", counts)
    monkeypatch.setattr(kc, "topic_partitions", count_of)
    monkeypatch.setattr(epoch_pace, "WAITING_MIRRORS_EPOCH_S", WAITING_EPOCH_S)

    engine.follow(config, LINK, spark, report, stop, epoch_s=EPOCH_S, mirrors=[listed, late])

    first, *later = report.seen
    assert not [e.error for e in report.seen if e.error]
    assert first.result.not_listed_yet == (late,)
    assert set(first.result.mirrors) == {listed}
    # Cut short: the epoch lasted about WAITING_EPOCH_S (its tasks fence at once), not EPOCH_S.
    assert first.result.duration_s < EPOCH_S / 2, first.result.duration_s
    copied_late = sum(m.records for e in later for name, m in e.result.mirrors.items() if name == late)
    assert copied_late == RECORDS, [e.result.to_dict()["mirrors"].keys() for e in later]
    for topic in (listed, late):
        assert_identical(read_topic(source_bootstrap, topic, 2), read_topic(destination_bootstrap, topic, 2))
