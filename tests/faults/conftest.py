"""Fixtures of the fault-injection suite: a link on the shared local pair and a place for process logs.

`make faults` sets MIRROR_PIPELINE_FAULTS=full for the whole suite (over a
hundred kill points); `make test` runs a seeded slice of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.config_files import write_pair_config

LINK = "faults"
FULL = os.environ.get("MIRROR_PIPELINE_FAULTS") == "full"


@pytest.fixture
def fault_config(tmp_path: Path, source_bootstrap: str, destination_bootstrap: str):
    """Factory: a mirror.yaml with link `faults` (its own state topics), small chunks, a short fence wait."""

    def write(settings: dict | None = None) -> Path:
        own_topics = {
            # Its own internal topics: a killed writer here never delays other tests' links.
            "mirror.state.topic": "_faults.state",
            "mirror.offset.map.topic": "_faults.offset-map",
            "mirror.checkpoints.topic": "_faults.checkpoints",
        }
        return write_pair_config(
            tmp_path / "mirror.yaml",
            source_bootstrap,
            destination_bootstrap,
            LINK,
            {**own_topics, **(settings or {})},
            defaults={"mirror.chunk.max.records": 2000},
        )

    return write


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


_REPORT: list[tuple[str, dict, object]] = []


class FaultReport:
    """`report(scenario, kill points by kind, verdict)`: a row of the table printed at the end of the run."""

    def __call__(self, scenario: str, kills: dict, verdict) -> None:
        _REPORT.append((scenario, dict(kills), verdict))

    def race(self, scenario: str):
        """A row for a race (no kill points), as `assert_clean(..., report=...)` takes it."""
        return lambda verdict: self(f"race: {scenario}", {}, verdict)


@pytest.fixture
def fault_report() -> FaultReport:
    return FaultReport()


def pytest_terminal_summary(terminalreporter) -> None:
    if not _REPORT:
        return
    tr = terminalreporter
    tr.section("fault suite")
    tr.write_line("| scenario | kill points | records checked | lost | duplicated | mismatched | wrong states |")
    tr.write_line("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    total = {"kills": 0, "records": 0, "lost": 0, "duplicated": 0, "mismatched": 0, "wrong": 0}
    for scenario, kills, v in _REPORT:
        points = ", ".join(f"{k} {n}" for k, n in kills.items() if n) or "-"
        tr.write_line(
            f"| {scenario} | {points} | {v.records_checked:,} | {v.lost} | {v.duplicated} | "
            f"{v.mismatched} | {v.wrong_states} |"
        )
        for key, value in (
            ("kills", sum(kills.values())),
            ("records", v.records_checked),
            ("lost", v.lost),
            ("duplicated", v.duplicated),
            ("mismatched", v.mismatched),
            ("wrong", v.wrong_states),
        ):
            total[key] += value
    tr.write_line(
        f"| all | {total['kills']} | {total['records']:,} | {total['lost']} | {total['duplicated']} | "
        f"{total['mismatched']} | {total['wrong']} |"
    )
