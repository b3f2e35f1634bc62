"""A valid two-link config whose clusters need not be running, and helpers for tests that never reach Kafka."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline_dagster.resources import MirrorEngine

TICK = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

VALID_CONFIG = """\
clusters:
  us-west:
    bootstrap.servers: 127.0.0.1:19999
  us-east:
    bootstrap.servers: 127.0.0.1:29999
links:
  west-to-east:
    source: us-west
    destination: us-east
  east.to.west:
    source: us-east
    destination: us-west
    mirror.lag.alert.records: 100
"""


def stub_engine(config_file: Path, **answers) -> MirrorEngine:
    """The engine resource with the named verbs answered by `answers` (verb -> function of the
    verb's arguments after `self`); every other verb is the real one."""
    methods = {
        name: (lambda answer: lambda self, *args, **kwargs: answer(*args, **kwargs))(fn) for name, fn in answers.items()
    }
    return type("StubEngine", (MirrorEngine,), methods)(config_path=str(config_file))


def mirrors_answer(mirrors: list[tuple[str, str]]):
    """`list_mirrors` answering the link's registry as (mirror topic, state) pairs."""
    return lambda link: [MirrorInfo(link, m, m, state, 0.0, "", 0.0) for m, state in mirrors]


def tick_schedule(defs: dg.Definitions, engine: MirrorEngine, instance, schedule_name: str):
    """One evaluation of a schedule at `TICK`."""
    schedule = defs.get_repository_def().get_schedule_def(schedule_name)
    with dg.build_schedule_context(
        instance=instance,
        resources={"mirror_engine": engine},
        repository_def=defs.get_repository_def(),
        scheduled_execution_time=TICK,
    ) as context:
        return schedule.evaluate_tick(context)
