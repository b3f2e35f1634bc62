"""The copy asset's check outcomes, built once for Dagster runs and CLI cycles alike."""

from __future__ import annotations

from dagster import AssetCheckSeverity

from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import FOREIGN_WRITE
from mirror_pipeline_dagster.mirror_checks import (
    FOREIGN_WRITES_CHECK,
    LAG_CHECK,
    foreign_writes_check_result,
    lag_check_result,
)


def mirror(name: str, flags: tuple = ()) -> MirrorInfo:
    return MirrorInfo("l", name, name, "ACTIVE", 0.0, "", 0.0, flags=flags)


def test_lag_passes_at_the_threshold_and_warns_above_it():
    at = lag_check_result(5, {"a": 5, "b": 0})
    assert (at.check_name, at.passed, at.severity) == (LAG_CHECK, True, AssetCheckSeverity.WARN)
    above = lag_check_result(5, {"a": 6, "b": 0})
    assert not above.passed and above.metadata["behind"].value == {"a": 6}


def test_a_flagged_mirror_fails_the_foreign_writes_check_as_an_error():
    clean = foreign_writes_check_result([mirror("a"), mirror("b")])
    assert (clean.check_name, clean.passed) == (FOREIGN_WRITES_CHECK, True)
    flagged = foreign_writes_check_result([mirror("b", (FOREIGN_WRITE,)), mirror("a")])
    assert not flagged.passed and flagged.severity == AssetCheckSeverity.ERROR
    assert flagged.metadata["flagged"].value == ["b"]
