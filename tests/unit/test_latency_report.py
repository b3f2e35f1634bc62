"""The latency benchmark's CPU comparison (what the issue's CPU target is read from), and which
records its tracker follows on a wide mirror."""

from collections import Counter
from types import SimpleNamespace

import numpy as np

from benchmarks.latency_load import MEASURED, SentLog, Spread, Tracker, _around_slowest, phase_stats
from benchmarks.latency_report import _cpu_against_mm2, copier_cpu_s

MM2 = {"benchmark": 40.0, "broker-a": 60.0, "broker-b": 50.0, "mm2": 100.0, "not-ours": 3.0, "wall": 300.0}
FOLLOW = {
    "benchmark": 45.0,
    "broker-a": 70.0,
    "broker-b": 55.0,
    "cli": 5.0,
    "spark-jvm": 60.0,
    "spark-python": 80.0,
    "not-ours": 2.0,
    "wall": 400.0,
}


def test_the_copier_cost_leaves_out_the_benchmarks_own_load_and_probe():
    assert copier_cpu_s(MM2) == 210.0
    assert copier_cpu_s(FOLLOW) == 270.0


def test_each_mode_is_set_against_mirrormaker_2_in_all_and_per_second():
    lines = _cpu_against_mm2({"mm2": {"cpu_s": MM2}, "follow": {"cpu_s": FOLLOW}})
    mm2_line, follow_line = lines[-2], lines[-1]
    assert "210.0 CPU-s in 300 s (0.70 cores)" in mm2_line and "x" not in mm2_line.split("cores")[1]
    # 270 / 210 in all; (270 / 400) / (210 / 300) per second.
    assert "270.0 CPU-s in 400 s (0.68 cores): 1.29x MirrorMaker 2's in all, 0.96x per second" in follow_line


MM2_LOAD = {"benchmark": 30.0, "broker-a": 40.0, "broker-b": 35.0, "mm2": 75.0, "wall": 240.0}
FOLLOW_LOAD = {"benchmark": 35.0, "broker-a": 45.0, "broker-b": 40.0, "spark-python": 50.0, "cli": 1.0, "wall": 240.1}


def test_the_steady_load_comes_first_and_is_set_against_mirrormaker_2_once():
    lines = _cpu_against_mm2(
        {
            "mm2": {"cpu_s": MM2, "load_cpu_s": MM2_LOAD},
            "follow": {"cpu_s": FOLLOW, "load_cpu_s": FOLLOW_LOAD},
        }
    )
    steady = lines[lines.index("  during the steady load:") + 1 : lines.index("  during the steady load:") + 3]
    assert "150.0 CPU-s in 240 s (0.62 cores)" in steady[0]
    # 136 / 150: the same records in the same time, so no per-second figure.
    assert steady[1].endswith("136.0 CPU-s in 240.1 s (0.57 cores): 0.91x MirrorMaker 2's")
    assert lines[-1].endswith(": 1.29x MirrorMaker 2's in all, 0.96x per second")


def test_without_mirrormaker_2_a_mode_is_given_alone():
    (follow_line,) = _cpu_against_mm2({"follow": {"cpu_s": FOLLOW}, "mm2": {"skipped": "no jars"}})[2:]
    assert follow_line.endswith("(0.68 cores)")
    assert _cpu_against_mm2({"follow": {"skipped": "no jars"}}) == []


def test_the_slowest_record_is_shown_with_what_came_just_before_and_after_it():
    produced = np.arange(0, 5000, 10, dtype=np.float64)  # a record every 10 ms for 5 s
    latency = np.full(len(produced), 9.0)
    latency[(produced >= 3000) & (produced < 3200)] = 150.0  # a pause of 200 ms at 3 s
    latency[produced == 3010] = 240.0
    s = _around_slowest(produced, latency)
    assert (s["at_s"], s["from_s"], s["step_ms"]) == (3.01, 1.5, 100)
    assert s["max_ms"] == [9] * 15 + [240, 150] + [9] * 4  # to 0.5 s after it


def _sent(records: int) -> SentLog:
    """A phase's log of `records` records produced 1 ms apart from t=1000 ms, all acknowledged."""
    log = SentLog()
    for seq in range(records):
        log.ts.append(1000 + seq)
        log.acked.append(1)
        log.acked_ms.append(0.0)
    return log


def test_a_wide_mirror_is_tracked_through_an_evenly_spread_sample_of_its_partitions():
    tracker = Tracker("127.0.0.1:1", "wide", 9900)  # not started: no client is opened
    assert tracker.step == 40 and len(tracker.tracked_partitions()) == 248
    assert list(tracker.tracked_partitions())[:3] == [0, 40, 80]
    assert len(Tracker("127.0.0.1:1", "narrow", 8).tracked_partitions()) == 8
    load = SimpleNamespace(logs={MEASURED: _sent(2 * 9900)})  # two records in every partition
    followed = [seq for seq in range(2 * 9900) if seq % 9900 % 40 == 0]
    seen = tracker.logs[MEASURED]
    for seq in followed[:-1]:
        seen.add(seq, 1000 + seq, 1000 + seq + 5.0)
    assert len(followed) == 496 and not tracker.arrived_all(load, MEASURED)
    stats = phase_stats(load, tracker, MEASURED)
    assert (stats["received"], stats["lost"], stats["p99_ms"]) == (495, 1, 5.0)

    seen.add(followed[-1], 1000 + followed[-1], 1000 + followed[-1] + 7.0)
    assert tracker.arrived_all(load, MEASURED)  # the records of partitions not followed are not waited for
    stats = phase_stats(load, tracker, MEASURED)
    assert (stats["received"], stats["lost"], stats["duplicated"], stats["max_ms"]) == (496, 0, 0, 7.0)
    assert (stats["tracked_partitions"], stats["partitions"]) == (248, 9900)


def test_a_load_over_many_topics_goes_round_robin_over_all_their_partitions():
    spread = Spread.of([f"t{i}" for i in range(1000)], 10)
    assert spread.width == 10_000 and not spread.narrow
    assert [spread.place(seq) for seq in (0, 9, 10, 9999, 10_000)] == [
        ("t0", 0),
        ("t0", 9),
        ("t1", 0),
        ("t999", 9),
        ("t0", 0),
    ]
    assert Spread.of("one", 8).place(13) == ("one", 5) and Spread.of("one", 8).narrow


def test_the_tracker_of_many_topics_samples_partitions_across_all_of_them():
    mirrors = [f"m{i}" for i in range(1000)]
    tracker = Tracker("127.0.0.1:1", mirrors, 10)  # not started: no client is opened
    assert (tracker.partitions, tracker.step, len(tracker.tracked_partitions())) == (10_000, 41, 244)
    followed = [tracker.spread.place(i) for i in tracker.tracked_partitions()]
    assert followed[:3] == [("m0", 0), ("m4", 1), ("m8", 2)] and followed[-1] == ("m996", 3)
    numbers = Counter(partition for _, partition in followed)
    assert sorted(numbers) == list(range(10)) and max(numbers.values()) - min(numbers.values()) <= 1
    assert tracker.tracked(10_001).sum() == 245  # sequence 10,000 is partition 0 of m0 again
