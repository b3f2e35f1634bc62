"""`run`'s text: the partitions that copied or lag (the 50 furthest behind), a line each for the
rest and for the idle ones, the mirrors a cycle could not plan yet because their new topics are
not listed by the destination; and a follow epoch's line for partitions its late task left to
the next epoch."""

from __future__ import annotations

from mirror_pipeline.cli.run import _render_cycle
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult, PartitionCopy, TaskMemory

MiB = 1024 * 1024


def copy(partition: int, records: int, lag: int = 0) -> PartitionCopy:
    return PartitionCopy(partition, 0, records, 0, records, records, records * 10, lag)


def test_idle_partitions_are_counted_not_listed():
    result = CycleResult(
        "l",
        0.0,
        1.0,
        2,
        {
            "busy": MirrorCopyResult("busy", "busy", (copy(0, 5), copy(1, 0, lag=3), copy(2, 0))),
            "quiet": MirrorCopyResult("quiet", "quiet", (copy(0, 0), copy(1, 0))),
        },
    )
    text = _render_cycle(result.to_dict())
    rows = [line.split()[:2] for line in text.splitlines() if line.startswith(("busy", "quiet"))]
    assert rows == [["busy", "0"], ["busy", "1"]]
    assert text.endswith("3 partition(s) up to date with nothing to copy (not listed)")


def test_mirrors_not_listed_yet_are_named_by_a_run_and_by_a_follow_epoch():
    waiting = tuple(f"m{i}" for i in range(7))
    text = _render_cycle(CycleResult("l", 0.0, 1.0, 0, {}, not_listed_yet=waiting).to_dict())
    assert (
        "7 mirror(s) created moments ago not copied yet: the destination does not list their topics yet; "
        "the next run copies them (m0, m1, m2, m3, m4 and 2 more)"
    ) in text

    from mirror_pipeline.cli.follow import epoch_line

    assert epoch_line(1, CycleResult("l", 0.0, 1.0, 0, {}, not_listed_yet=waiting).to_dict(), "").endswith(
        "; 7 mirror(s) created moments ago not copied in it, their topics not listed by the destination yet "
        "(m0, m1, m2, m3, m4 and 2 more): the next epoch, sooner than usual, takes them"
    )


def test_a_failed_cycle_names_five_mirrors_and_counts_the_rest():
    from mirror_pipeline.replication.cycle import _first_errors

    errors = {f"m{i}": "writing failed" for i in range(8)}
    assert _first_errors(errors) == (
        "m0: writing failed; m1: writing failed; m2: writing failed; m3: writing failed; "
        "m4: writing failed; and 3 more mirror(s) (`run --json` names every one)"
    )
    assert _first_errors({"m": "gone"}) == "m: gone"


def test_a_follow_epoch_says_which_partitions_it_left_to_the_next_one():
    from mirror_pipeline.cli.follow import epoch_line

    late = PartitionCopy(0, 0, 0, 0, 0, 0, 0, 40, left_to_next_epoch=True)
    result = CycleResult("l", 0.0, 3.0, 2, {"m": MirrorCopyResult("m", "s", (late, copy(1, 0, lag=6)))})
    assert result.to_dict()["left_to_next_epoch"] == 1
    line = epoch_line(1, result.to_dict(), "")
    assert line == (
        "epoch 1: copied 0 records (0 bytes) in 3.0s over 2 partitions; lag after: 46; 1 partition(s) left to "
        "the next epoch (their copy task started too late to take over in this one, or was still waiting out "
        "records in doubt: the task before's, or a round not acknowledged in time)"
    )
    on_time = CycleResult("l", 0.0, 3.0, 1, {"m": MirrorCopyResult("m", "s", (copy(0, 0, lag=6),))})
    assert "left to the next epoch" not in epoch_line(2, on_time.to_dict(), "")


def test_a_follow_epoch_says_how_many_rounds_were_not_acknowledged_in_time_and_that_it_copied_on():
    from mirror_pipeline.cli.follow import epoch_line

    held = PartitionCopy(0, 0, 10, 0, 10, 10, 0, 0, rounds_held=2)
    result = CycleResult("l", 0.0, 3.0, 2, {"m": MirrorCopyResult("m", "s", (held, copy(1, 0)))})
    assert result.to_dict()["rounds_held"] == 2
    assert epoch_line(1, result.to_dict(), "").endswith(
        "; 2 round(s) not acknowledged in time (a destination broker slow or stalled): their partitions were "
        "held until none of those records could land, then copied on"
    )


def test_a_follow_epoch_says_how_long_its_slowest_task_took_to_take_over():
    from mirror_pipeline.cli.follow import epoch_line
    from mirror_pipeline.replication.copier import UnitResult
    from mirror_pipeline.replication.cycle import _slowest_take_over

    def took_over(partition: int, fenced_ms: int, ready_ms: int) -> UnitResult:
        return UnitResult(
            "m", partition, 0, 0, 0, 0, fenced_after_hand_over_ms=fenced_ms, ready_after_hand_over_ms=ready_ms
        )

    # Two tasks: the slowest fence and the slowest readiness, which may be different tasks'.
    slowest = _slowest_take_over([took_over(0, 70, 90), took_over(1, 40, 130), UnitResult("m", 2, 0, 0, 0, 0)])
    assert slowest == {"fenced": 70, "ready": 130}
    result = CycleResult("l", 0.0, 3.0, 3, {"m": MirrorCopyResult("m", "s", (copy(0, 0),))}, hand_over_ms=slowest)
    assert result.to_dict()["hand_over_ms"] == slowest
    assert epoch_line(2, result.to_dict(), "").endswith(
        "; taken over 130 ms after the hand-over time (fenced 70 ms after it)"
    )
    # An epoch planned in full, whose tasks took over from none.
    assert _slowest_take_over([UnitResult("m", 0, 0, 0, 0, 0)]) is None
    first = CycleResult("l", 0.0, 3.0, 1, {"m": MirrorCopyResult("m", "s", (copy(0, 5),))})
    assert first.to_dict()["hand_over_ms"] is None
    assert "taken over" not in epoch_line(1, first.to_dict(), "")


def test_a_wide_cycle_shows_the_partitions_behind_and_counts_the_rest():
    from mirror_pipeline.cli.run import ROWS_SHOWN

    busy = tuple(copy(p, 1) for p in range(ROWS_SHOWN + 20)) + (copy(ROWS_SHOWN + 20, 1, lag=9), copy(999, 0))
    text = _render_cycle(CycleResult("l", 0.0, 1.0, 1, {"wide": MirrorCopyResult("wide", "w", busy)}).to_dict())
    rows = [line.split() for line in text.splitlines() if line.startswith("wide")]
    assert len(rows) == ROWS_SHOWN and rows[-1][1] == str(ROWS_SHOWN + 20) and rows[-1][5] == "9"
    assert [int(r[1]) for r in rows] == sorted(int(r[1]) for r in rows)
    assert "21 more partition(s) that copied or are behind (`run --json` lists them)" in text
    assert text.endswith("1 partition(s) up to date with nothing to copy (not listed)")


def test_a_cycle_whose_task_grew_past_its_memory_budget_says_so_and_one_within_it_does_not():
    from mirror_pipeline.cli.follow import epoch_line

    # (resident memory at a task's start, its peak): the second task grew the most, the third the highest.
    grew = TaskMemory.of(256 * MiB, [(100 * MiB, 300 * MiB), (90 * MiB, 400 * MiB), (-1, -1), (200 * MiB, 420 * MiB)])
    assert grew == TaskMemory(256 * MiB, 420 * MiB, 310 * MiB)
    result = CycleResult("l", 0.0, 1.0, 1, {"m": MirrorCopyResult("m", "s", (copy(0, 5),))}, task_memory=grew)
    said = (
        "a copy task grew by 310 MiB while it ran, more than the link's task memory budget for record buffers "
        "(256 MiB, mirror.task.memory.bytes); the busiest Spark worker peaked at 420 MiB"
    )
    assert _render_cycle(result.to_dict()).endswith(said)
    assert epoch_line(1, result.to_dict(), "").endswith(f"; {said}")
    within = CycleResult("l", 0.0, 1.0, 1, {}, task_memory=TaskMemory.of(256 * MiB, [(100 * MiB, 300 * MiB)]))
    assert within.to_dict()["task_memory"] == {
        "budget_bytes": 256 * MiB,
        "peak_rss_bytes": 300 * MiB,
        "growth_bytes": 200 * MiB,
    }
    assert "memory" not in _render_cycle(within.to_dict())
    unmeasured = CycleResult("l", 0.0, 1.0, 0, {}, task_memory=TaskMemory.of(256 * MiB, [(-1, -1)]))
    assert "memory" not in epoch_line(2, unmeasured.to_dict(), "")
