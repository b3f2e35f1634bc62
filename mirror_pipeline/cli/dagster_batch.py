"""Many runless materializations of one asset written to the Dagster instance in batches.

`DagsterInstance.report_runless_asset_event` writes one event at a time, and
a write costs 20-40 ms whatever it carries: on SQLite (the default storage:
one database file per run, and an index file) each event opens two
connections, each through a new SQLAlchemy engine that compiles every
statement again, and commits twice; on PostgreSQL each is its own INSERT and
commit. A wide link's command records one materialization per mirror, so
1,000 mirrors took 20-40 s (benchmarks/dagster_record.py).

Here the events are built as `report_runless_asset_event` builds them (the
same `DagsterEvent` in the same `EventLogEntry`, under Dagster's runless run
id and job name) and handed to the instance's event log storage in batches:

- PostgreSQL (`dagster_postgres`): the storage's own `store_event_batch`, one
  multi-row INSERT per batch and the asset's latest materialization written
  once, as Dagster's run workers write batches (DAGSTER_EVENT_BATCH_SIZE);
- SQLite: Dagster's `store_event_batch` there is a loop of `store_event`, so
  the batch goes through the storage's own statements and methods, exactly as
  `SqliteEventLogStorage.store_event` stores each event, with one connection
  and one commit per database file for the whole batch;
- any other storage: its own `store_event_batch`.

`DagsterInstance.report_dagster_event(..., batch_metadata=...)` is not used:
it batches only while the environment variable DAGSTER_EVENT_BATCH_SIZE is
set, read at every event, so turning it on here would turn it on for every
other thread of the process too, and it writes SQLite one event at a time
all the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from dagster import AssetMaterialization, DagsterEvent, DagsterEventType, DagsterInstance, EventLogEntry

# Events per write: bounds one INSERT's size (an offset sync's event carries the rows of its mirror's groups)
# and how long one transaction holds SQLite's write lock, which the UI's and the daemon's writes wait on.
BATCH = 250

Writer = Callable[[list[EventLogEntry]], None]


def materialize(instance: DagsterInstance, materializations: Sequence[AssetMaterialization]) -> None:
    """Record `materializations` (all of one asset) outside any run, as `report_runless_asset_event` would."""
    keys = {m.asset_key for m in materializations}
    if len(keys) > 1:
        raise ValueError(f"one batch records one asset, not {sorted(k.to_user_string() for k in keys)}")
    internals = _dagster_internals(instance)
    if internals is None:  # this Dagster lacks a piece the batch needs: one event at a time, as Dagster does
        for materialization in materializations:
            instance.report_runless_asset_event(materialization)
        return
    entry_of, write = internals
    for start in range(0, len(materializations), BATCH):
        write([entry_of(m) for m in materializations[start : start + BATCH]])


def _dagster_internals(
    instance: DagsterInstance,
) -> tuple[Callable[[AssetMaterialization], EventLogEntry], Writer] | None:
    """How this Dagster builds a runless materialization's event, and how its storage writes a batch of them.

    Private to Dagster (checked against Dagster 1.13.27): the runless run id and
    job name, `StepMaterializationData` (as `_report_runless_asset_event`
    builds the event), and the SQLite storage's class and the statements and
    methods `SqliteEventLogStorage.store_event` uses. None where any of them is
    missing, so that a Dagster without them is written to one event at a time.
    """
    try:
        from dagster._core.events import StepMaterializationData
        from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID
        from dagster._core.storage.event_log import SqliteEventLogStorage
    except ImportError:
        return None
    storage = getattr(instance, "event_log_storage", None)
    if storage is None or not hasattr(storage, "store_event_batch"):
        return None

    def entry_of(materialization: AssetMaterialization) -> EventLogEntry:
        event = DagsterEvent(
            event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
            event_specific_data=StepMaterializationData(materialization),
            job_name=RUNLESS_JOB_NAME,
        )
        return EventLogEntry(
            user_message="",
            level=logging.INFO,
            job_name=event.job_name,
            run_id=RUNLESS_RUN_ID,
            error_info=None,
            timestamp=time.time(),
            step_key=event.step_key,
            dagster_event=event,
        )

    if not isinstance(storage, SqliteEventLogStorage):
        return entry_of, storage.store_event_batch
    if not all(hasattr(storage, m) for m in _SQLITE_METHODS):
        return None
    return entry_of, lambda entries: _sqlite_batch(storage, RUNLESS_RUN_ID, entries)


# What `SqliteEventLogStorage.store_event` calls to store an asset event (its private `_store_asset_event*`
# take a connection; these public forms of them open their own).
_SQLITE_METHODS = (
    "prepare_insert_event",
    "run_connection",
    "index_transaction",
    "store_asset_event_tags",
    "store_asset_event",
)


def _sqlite_batch(storage, run_id: str, entries: list[EventLogEntry]) -> None:
    """The entries stored as `SqliteEventLogStorage.store_event` stores each (in the run's database, then in
    the index with the asset's tags and latest materialization), with one connection per database file."""
    statements = [storage.prepare_insert_event(entry) for entry in entries]  # each event serialized once
    with storage.run_connection(run_id) as conn:
        for statement in statements:
            conn.execute(statement)
    with storage.index_transaction() as conn:
        ids = [int(conn.execute(statement).inserted_primary_key[0]) for statement in statements]
    storage.store_asset_event_tags(entries, ids)
    storage.store_asset_event(entries[-1], ids[-1])  # the asset's latest materialization: the batch's last
