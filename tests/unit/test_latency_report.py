"""The latency benchmark's CPU comparison: what the issue's CPU target is read from."""

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


def test_without_mirrormaker_2_a_mode_is_given_alone():
    (follow_line,) = _cpu_against_mm2({"follow": {"cpu_s": FOLLOW}, "mm2": {"skipped": "no jars"}})[2:]
    assert follow_line.endswith("(0.68 cores)")
    assert _cpu_against_mm2({"follow": {"skipped": "no jars"}}) == []
