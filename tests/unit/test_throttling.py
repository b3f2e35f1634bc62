"""What a write failure adds when the destination's brokers throttled the link's writers."""

from __future__ import annotations

from types import SimpleNamespace

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.replication.throttling import RECENT_S, ThrottleWatch


def test_no_throttle_adds_nothing_and_the_longest_throttle_is_named():
    watch = ThrottleWatch()
    settings = watch.watching(kc.client_config({"bootstrap.servers": "127.0.0.1:1"}, "east", "writer"))
    assert settings["throttle_cb"] is watch and settings["client.id"] == "mirror-pipeline.east.writer"
    assert watch.why_late() == ""

    for seconds in (0.25, 3.5, 1.0, 0.0):  # librdkafka reports 0 once a broker stops throttling
        settings["throttle_cb"](SimpleNamespace(broker_name="b", broker_id=1, throttle_time=seconds))

    why = watch.why_late()
    assert "throttled this link's writers for up to 3500 ms" in why
    assert "client id 'mirror-pipeline.east.writer'" in why and "mirror.writer.fence.wait.ms" in why


def test_a_throttle_long_past_is_not_blamed_for_a_failure_now():
    now = [1000.0]
    watch = ThrottleWatch(clock=lambda: now[0])
    watch(SimpleNamespace(broker_name="b", broker_id=1, throttle_time=9.0))
    now[0] += RECENT_S - 1
    watch(SimpleNamespace(broker_name="b", broker_id=1, throttle_time=0.5))
    assert watch.longest_ms == 9000
    now[0] += 2  # the 9 s throttle is over a minute old now
    assert watch.longest_ms == 500
    now[0] += RECENT_S
    assert watch.why_late() == ""
