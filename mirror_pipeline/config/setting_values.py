"""The value types of link settings: strict coercion, bounds and name rules (R-CFG-2, R-CFG-4).

A YAML file is hand-written, and `enable: yes` or `sync.ms: 30s` silently
meaning something else is worse than an error. Every number has an upper
bound that fits what it feeds:

| setting | allowed | why the maximum |
| --- | --- | --- |
| `consumer.offset.sync.ms`, `topic.config.sync.ms`, `acl.sync.ms` | 1 .. 86400000 | the sync runs on a cron schedule, which repeats at least daily |
| `cluster.link.retry.timeout.ms` | 1 .. 2147483647 | Kafka's and librdkafka's int32 ms settings (about 24.8 days) |
| `mirror.unit.max.bytes` | 1 .. 1099511627776 | 1 TiB: one Spark task's share of one cycle |
| `mirror.chunk.max.records` | 1 .. 1000000 | a chunk is queued in the writer at once, whose queue holds 1000000 records |
| `mirror.log.start.alignment.max.records` | 0 .. 1000000 | placeholders are produced in one go: they must fit the writer's queue and land within a minute |
| `mirror.writer.fence.wait.ms` | 0 .. 3600000 | one hour; the writer's librdkafka `delivery.timeout.ms` is derived from it |
| `mirror.lag.alert.records` | 0 .. 9223372036854775807 | Kafka offsets are 64-bit |
| `emit.heartbeats.interval.seconds` | 1 .. 3600 | an hour: a probe rarer than that says little about a recovery point |

Topic names follow Kafka's rules: up to 249 characters from [A-Za-z0-9._-],
not `.` or `..`, and two names that differ only in `.` versus `_` collide.
Messages quote a value only when it is short enough to quote whole, so that
the loader's scrubbing of secrets (a YAML alias can move one here) is complete.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticCustomError

from mirror_pipeline.config.acl_filters import AclFilters
from mirror_pipeline.config.filters import NameFilters, kind_of
from mirror_pipeline.model.errors import ConfigError

TOPIC_CHARS = "[A-Za-z0-9._-]"
TOPIC_NAME_MAX = 249
_TOPIC_NAME = re.compile(rf"{TOPIC_CHARS}{{1,{TOPIC_NAME_MAX}}}")
SEPARATOR_MAX = 8
_SEPARATOR = re.compile(rf"{TOPIC_CHARS}{{1,{SEPARATOR_MAX}}}")
_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SHOWN_MAX = 40

SYNC_MS = (1, 86_400_000, "one day: the sync runs on a cron schedule, which repeats at least daily")
RETRY_TIMEOUT_MS = (1, 2**31 - 1, "Kafka's int32 limit for ms settings, about 24.8 days")
UNIT_MAX_BYTES = (1, 2**40, "1 TiB: one Spark task's share of one cycle")
CHUNK_MAX_RECORDS = (1, 1_000_000, "a chunk is queued in the writer at once, whose queue holds 1000000 records")
ALIGNMENT_MAX_RECORDS = (
    0,
    1_000_000,
    "placeholders are produced in one go: they must fit the writer's queue and land within a minute",
)
FENCE_WAIT_MS = (0, 3_600_000, "one hour; the writer's delivery.timeout.ms is derived from it")
# Each slot is a transactional writer a cycle may fence and a stop fences for each partition it serves.
# A copy task holds a writer (a librdkafka client of 3-4 threads) per slot it serves: with the default
# master's four task slots, follow mode's two tasks hold 8 writers each (`replication.task_groups`).
DEFAULT_WRITER_SLOTS = 16
WRITER_SLOTS = (1, 1024, "each is a transactional id on the destination, all fenced by a wide cycle")
LAG_ALERT_RECORDS = (0, 2**63 - 1, "Kafka offsets are 64-bit")
# The Dagster daemon evaluates a sensor at most every 5 s (its sensor loop's floor), so less means nothing.
LAG_SENSOR_INTERVAL_S = (5, 3600, "an hour; the replicate schedule runs every minute")
# 0: no bound. A run ended at its bound loses nothing (the copy is crash-safe); the next run goes on.
RUN_MAX_RUNTIME_S = (0, 7 * 86_400, "a week; 0 means no bound")
HEARTBEAT_INTERVAL_S = (1, 3600, "an hour: a probe rarer than that says little about a recovery point")
# A copy task's memory budget (`replication.task_memory` splits it): the default, and the
# least that leaves its buffers large enough to copy at a useful rate.
DEFAULT_TASK_MEMORY_BYTES = 256 * 1024**2
MIN_TASK_MEMORY_BYTES = 16 * 1024**2
TASK_MEMORY_BYTES = (MIN_TASK_MEMORY_BYTES, 64 * 1024**3, "64 GiB: one Spark task's buffers")
FRESHNESS_MS = (
    60_000,
    7 * 86_400_000,
    "a week; the replicate schedule runs every minute, so under a minute is always late",
)


def show(value: Any) -> str:
    """A value for a message: a short string whole, anything else by its kind only."""
    if isinstance(value, str):
        return repr(value) if len(value) <= _SHOWN_MAX else f"a string of {len(value)} characters"
    return kind_of(value)


def invalid(expected: str, value: Any) -> PydanticCustomError:
    return PydanticCustomError("setting", "expected {expected}, got {got}", {"expected": expected, "got": show(value)})


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise invalid("true or false", value)


@dataclass(frozen=True)
class Bounds:
    """A whole-number setting's range, kept beside its check for the configuration reference."""

    low: int
    high: int
    why: str


def whole_number(low: int, high: int, why: str) -> Callable[[Any], int]:
    """A whole number from `low` to `high` (an int or its decimal digits); `why` explains `high`."""

    def check(value: Any) -> int:
        if isinstance(value, str) and value.isascii() and value.isdigit():
            digits = value.lstrip("0") or "0"
            number = int(digits) if len(digits) <= len(str(high)) else high + 1
        elif isinstance(value, bool) or not isinstance(value, int):
            raise invalid("a whole number", value)
        else:
            number = value
        if number < low:
            raise PydanticCustomError(
                "setting",
                "must be greater than 0" if low == 1 else "must be greater than or equal to {low}",
                {"low": low},
            )
        if number > high:
            raise PydanticCustomError("setting", "must be at most {high} ({why})", {"high": high, "why": why})
        return number

    return check


def topic_part(empty_is_none: bool) -> Callable[[Any], str | None]:
    """A prefix (`empty_is_none`) or a whole topic name; None when not set."""

    def check(value: Any) -> str | None:
        if value is None or (empty_is_none and value == ""):
            return None
        if not isinstance(value, str) or not _TOPIC_NAME.fullmatch(value):
            raise invalid(f"up to 249 characters from {TOPIC_CHARS}", value)
        if not empty_is_none and value in (".", ".."):
            raise invalid(f"a topic name (up to 249 characters from {TOPIC_CHARS}, not '.' or '..')", value)
        return value

    return check


def separator(value: Any) -> str:
    if value == "":
        raise PydanticCustomError(
            "setting",
            "must have at least 1 character; allowed: 1 to {most} characters from {chars}",
            {"most": SEPARATOR_MAX, "chars": TOPIC_CHARS},
        )
    if not isinstance(value, str) or not _SEPARATOR.fullmatch(value):
        raise invalid(f"1 to {SEPARATOR_MAX} characters from {TOPIC_CHARS} (it becomes part of topic names)", value)
    return value


def policy_class(value: Any) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > 200 or not _CLASS_PATH.fullmatch(value):
        raise invalid(
            "DefaultReplicationPolicy, IdentityReplicationPolicy or a dotted path to a replication policy class", value
        )
    return value


# A Kafka principal as ACLs name it: `Type:name` (`User:mirror`, `User:CN=mirror,O=ops`).
_PRINCIPAL = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}:[^\s\x00-\x1f]{1,255}")


def principal(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _PRINCIPAL.fullmatch(value) or value.endswith(":*"):
        raise invalid("a Kafka principal such as User:mirror (not a wildcard)", value)
    return value


def lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def filters(list_key: str) -> Callable[[Any], NameFilters]:
    def parse(value: Any) -> NameFilters:
        try:
            return NameFilters.parse(value, list_key=list_key, where="@")
        except ConfigError as exc:
            # The location is rebuilt from pydantic's error path; keep only the reason.
            raise PydanticCustomError("filters", "{reason}", {"reason": str(exc).removeprefix("@: ")}) from None

    return parse


def acl_filters(value: Any) -> AclFilters:
    try:
        return AclFilters.parse(value, where="@")
    except ConfigError as exc:
        # The location is rebuilt from pydantic's error path; keep only the reason.
        raise PydanticCustomError("filters", "{reason}", {"reason": str(exc).removeprefix("@: ")}) from None


def internal_name_clash(names: Mapping[str, tuple[str | None, str]]) -> tuple[str, str] | None:
    """The first internal topic setting whose name equals, or collides on Kafka's `.`/`_`
    equivalence with, another internal topic of the same link: (setting, reason).

    `names` maps each setting to (its configured name or None, the name the link uses).
    """
    seen: dict[str, tuple[str, str, bool]] = {}
    for setting, (configured, name) in names.items():
        key = name.replace(".", "_")
        if key in seen:
            other, other_name, other_configured = seen[key]
            # Blame a configured name: two defaults never collide.
            blamed, against, shown = (
                (setting, other, other_name) if configured or not other_configured else (other, setting, name)
            )
            what = (
                "is the same name as"
                if other_name == name
                else "collides (Kafka treats '.' and '_' alike in topic names) with"
            )
            return blamed, (f"{what} {against} ('{shown}'); every internal topic of a link needs a name of its own")
        seen[key] = (setting, name, configured is not None)
    return None
