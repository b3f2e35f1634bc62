"""The metrics' window of recorded copies, read back from a real Dagster instance (SQLite, a temporary home)."""

from __future__ import annotations

import logging
import time

import dagster as dg
import pytest
from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData

from mirror_pipeline_dagster import metrics_history
from mirror_pipeline_dagster.metrics_history import recorded_copies
from mirror_pipeline_dagster.naming import LinkNames

LINK = "west-to-east"
WINDOW_S = 300.0


def store(instance: dg.DagsterInstance, mirror: str, stamped: float) -> None:
    """A copy of `mirror` recorded as the CLI records it, stamped `stamped`."""
    materialization = dg.AssetMaterialization(
        LinkNames(LINK).mirror_data_key, partition=mirror, metadata={"bytes": 7, "cycle_duration_s": 1.0}
    )
    event = DagsterEvent(
        event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
        event_specific_data=StepMaterializationData(materialization),
        job_name="__RUNLESS__",
    )
    instance.store_event(
        dg.EventLogEntry(
            user_message="",
            level=logging.INFO,
            job_name=event.job_name,
            run_id="",
            error_info=None,
            timestamp=stamped,
            dagster_event=event,
        )
    )


@pytest.fixture
def instance(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield instance


def test_the_window_holds_exactly_the_copies_stamped_in_it_and_reads_few_older_ones(instance, monkeypatch):
    now = time.time()
    for i in range(30):
        store(instance, f"old-{i}", now - 10 * WINDOW_S + i)
    store(instance, "in-window", now - 10)
    store(instance, "stored-late", now - WINDOW_S + 60)  # stamped before the one stored before it
    store(instance, "skewed-old", now - 5 * WINDOW_S)  # an old stamp stored last must not end the read
    store(instance, "newest", now - 1)

    pages = []
    fetch = instance.fetch_materializations

    def counted(*args, **kwargs):
        pages.append(kwargs.get("limit"))
        return fetch(*args, **kwargs)

    monkeypatch.setattr(instance, "fetch_materializations", counted)
    monkeypatch.setattr(metrics_history, "_FIRST_PAGE", 4)
    copies = recorded_copies(instance, LINK, now - WINDOW_S)

    assert [c.mirror for c in copies] == ["in-window", "stored-late", "newest"]  # oldest stored first
    assert all(c.bytes == 7 for c in copies)
    # The newest 4 records (three in the window), then 8 more, all stamped before the window and its margin: done.
    assert pages == [4, 8]
