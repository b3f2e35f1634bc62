"""`run`'s text: the partitions that copied or lag, one line for the idle rest, and the mirrors
a cycle could not plan yet because their new topics are not listed by the destination."""

from __future__ import annotations

from mirror_pipeline.cli.run import _render_cycle
from mirror_pipeline.model.results import CycleResult, MirrorCopyResult, PartitionCopy


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


def test_mirrors_not_listed_yet_are_named():
    waiting = tuple(f"m{i}" for i in range(7))
    text = _render_cycle(CycleResult("l", 0.0, 1.0, 0, {}, not_listed_yet=waiting).to_dict())
    assert (
        "7 mirror(s) created moments ago not copied yet: the destination does not list their topics yet; "
        "the next run copies them (m0, m1, m2, m3, m4 and 2 more)"
    ) in text


def test_a_failed_cycle_names_five_mirrors_and_counts_the_rest():
    from mirror_pipeline.replication.cycle import _first_errors

    errors = {f"m{i}": "writing failed" for i in range(8)}
    assert _first_errors(errors) == (
        "m0: writing failed; m1: writing failed; m2: writing failed; m3: writing failed; "
        "m4: writing failed; and 3 more mirror(s) (`run --json` names every one)"
    )
    assert _first_errors({"m": "gone"}) == "m: gone"
