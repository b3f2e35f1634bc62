"""The annotated types of link settings: each is the value's type, the check that coerces
a hand-written value into it (`setting_values`) and, for numbers, the bounds that check
enforces, carried as metadata so the configuration reference shows them.

Each is spelled out as `Annotated[...]` (not made by a function) so that it is a type
alias a type checker reads as its value type.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from mirror_pipeline.config.filters import NameFilters
from mirror_pipeline.config.setting_values import (
    ALIGNMENT_MAX_RECORDS,
    CHUNK_MAX_RECORDS,
    FENCE_WAIT_MS,
    FRESHNESS_MS,
    HEARTBEAT_INTERVAL_S,
    LAG_ALERT_RECORDS,
    LAG_SENSOR_INTERVAL_S,
    RETRY_TIMEOUT_MS,
    RUN_MAX_RUNTIME_S,
    SYNC_MS,
    TASK_MEMORY_BYTES,
    UNIT_MAX_BYTES,
    WRITER_SLOTS,
    Bounds,
    boolean,
    filters,
    topic_part,
    whole_number,
)

# Whole numbers with their bounds (see `setting_values` for each maximum's reason).
SyncMs = Annotated[int, BeforeValidator(whole_number(*SYNC_MS)), Bounds(*SYNC_MS)]
RetryTimeoutMs = Annotated[int, BeforeValidator(whole_number(*RETRY_TIMEOUT_MS)), Bounds(*RETRY_TIMEOUT_MS)]
UnitMaxBytes = Annotated[int, BeforeValidator(whole_number(*UNIT_MAX_BYTES)), Bounds(*UNIT_MAX_BYTES)]
ChunkMaxRecords = Annotated[int, BeforeValidator(whole_number(*CHUNK_MAX_RECORDS)), Bounds(*CHUNK_MAX_RECORDS)]
AlignmentMaxRecords = Annotated[
    int, BeforeValidator(whole_number(*ALIGNMENT_MAX_RECORDS)), Bounds(*ALIGNMENT_MAX_RECORDS)
]
FenceWaitMs = Annotated[int, BeforeValidator(whole_number(*FENCE_WAIT_MS)), Bounds(*FENCE_WAIT_MS)]
LagAlertRecords = Annotated[int, BeforeValidator(whole_number(*LAG_ALERT_RECORDS)), Bounds(*LAG_ALERT_RECORDS)]
HeartbeatIntervalS = Annotated[int, BeforeValidator(whole_number(*HEARTBEAT_INTERVAL_S)), Bounds(*HEARTBEAT_INTERVAL_S)]
LagSensorIntervalS = Annotated[
    int, BeforeValidator(whole_number(*LAG_SENSOR_INTERVAL_S)), Bounds(*LAG_SENSOR_INTERVAL_S)
]
FreshnessMs = Annotated[int, BeforeValidator(whole_number(*FRESHNESS_MS)), Bounds(*FRESHNESS_MS)]
RunMaxRuntimeS = Annotated[int, BeforeValidator(whole_number(*RUN_MAX_RUNTIME_S)), Bounds(*RUN_MAX_RUNTIME_S)]
WriterSlots = Annotated[int, BeforeValidator(whole_number(*WRITER_SLOTS)), Bounds(*WRITER_SLOTS)]
TaskMemoryBytes = Annotated[int, BeforeValidator(whole_number(*TASK_MEMORY_BYTES)), Bounds(*TASK_MEMORY_BYTES)]
Bool = Annotated[bool, BeforeValidator(boolean)]
Prefix = Annotated[str | None, BeforeValidator(topic_part(empty_is_none=True))]
TopicName = Annotated[str | None, BeforeValidator(topic_part(empty_is_none=False))]
TopicFilters = Annotated[NameFilters, BeforeValidator(filters("topicFilters"))]
GroupFilters = Annotated[NameFilters, BeforeValidator(filters("groupFilters"))]
