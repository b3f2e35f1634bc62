"""Link settings: the Cluster Linking / MirrorMaker 2 property names, typed (R-CFG-2).

Each field's alias is the property name an operator writes in `mirror.yaml`;
the attribute is what the engine reads. Values are coerced strictly: a YAML
file is hand-written, and `enable: yes` or `sync.ms: 30s` silently meaning
something else is worse than an error; every number has an upper bound that
fits what it feeds, and internal topic names are legal and distinct (the value
types and their limits: `setting_values`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from mirror_pipeline.config import setting_values as values
from mirror_pipeline.config.acl_filters import AclFilters
from mirror_pipeline.config.filters import NameFilters
from mirror_pipeline.config.replication_policy import (
    INTERNAL_TOPIC_SETTINGS,
    ReplicationPolicy,
    names_mirrors_itself,
)
from mirror_pipeline.config.replication_policy import policy_class as load_policy_class
from mirror_pipeline.config.setting_types import (
    AlignmentMaxRecords,
    Bool,
    ChunkMaxRecords,
    FenceWaitMs,
    FreshnessMs,
    GroupFilters,
    HeartbeatIntervalS,
    LagAlertRecords,
    LagSensorIntervalS,
    Prefix,
    RetryTimeoutMs,
    RunMaxRuntimeS,
    SyncMs,
    TaskMemoryBytes,
    TopicFilters,
    TopicName,
    UnitMaxBytes,
    WriterSlots,
)
from mirror_pipeline.config.validation_messages import validation_problems
from mirror_pipeline.model.errors import ConfigError

_FILTER_LIST_KEYS = {"auto_create_filters": "topicFilters", "offset_group_filters": "groupFilters"}


class LinkSettings(BaseModel):
    """Every setting a link has, with its default; also the shape of `defaults:`."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True, arbitrary_types_allowed=True
    )

    prefix: Prefix = Field(
        None,
        alias="cluster.link.prefix",
        description=(
            "prefix added to mirror topic names (`orders` becomes `west.orders`); also to synced group "
            "names with `consumer.group.prefix.enable`"
        ),
    )
    auto_create_enable: Bool = Field(
        False,
        alias="auto.create.mirror.topics.enable",
        description=(
            "mirror every source topic the auto-create filters select, at every cycle and by the "
            "auto-create sensor (R-AC-1..4)"
        ),
    )
    auto_create_filters: TopicFilters = Field(
        NameFilters(),
        alias="auto.create.mirror.topics.filters",
        description=(
            "Cluster Linking `topicFilters` (LITERAL or PREFIXED names, INCLUDE or EXCLUDE) choosing the "
            "topics auto-create mirrors; required when auto-create is on"
        ),
    )
    offset_sync_enable: Bool = Field(
        False,
        alias="consumer.offset.sync.enable",
        description="translate the committed offsets of the selected consumer groups onto the mirrors (R-OFS-1..7)",
    )
    offset_group_filters: GroupFilters = Field(
        NameFilters(),
        alias="consumer.offset.group.filters",
        description="Cluster Linking `groupFilters` choosing the consumer groups whose offsets are synced",
    )
    offset_sync_ms: SyncMs = Field(
        30000,
        alias="consumer.offset.sync.ms",
        description=(
            "how often offsets are synced (the offsets schedule and follow mode, rounded up to whole "
            "minutes for a schedule)"
        ),
    )
    group_prefix_enable: Bool = Field(
        False,
        alias="consumer.group.prefix.enable",
        description=(
            "destination groups carry `cluster.link.prefix` (which must be set); cannot change while the "
            "link has mirrors"
        ),
    )
    acl_sync_enable: Bool = Field(
        False,
        alias="acl.sync.enable",
        description=(
            "copy the source ACL bindings `acl.filters` select to the destination and keep them in sync (R-ACL-1)"
        ),
    )
    acl_filters: Annotated[AclFilters, BeforeValidator(values.acl_filters)] = Field(
        AclFilters(),
        alias="acl.filters",
        description=(
            "Cluster Linking `aclFilters` selecting the bindings ACL sync copies; required when ACL sync is on"
        ),
    )
    acl_sync_ms: SyncMs = Field(
        60000, alias="acl.sync.ms", description="how often ACL sync runs (its Dagster schedule)"
    )
    config_sync_ms: SyncMs = Field(
        5000,
        alias="topic.config.sync.ms",
        description=(
            "how often mirror topic configs are synced from their source (the config schedule and follow mode)"
        ),
    )
    retry_timeout_ms: RetryTimeoutMs = Field(
        300000,
        alias="cluster.link.retry.timeout.ms",
        description="how long a source topic may stay unreachable or unreadable before its mirror becomes FAILED",
    )
    # "" is Cluster Linking naming: identity, plus the prefix if there is one.
    policy_class: Annotated[str, BeforeValidator(values.policy_class)] = Field(
        "",
        alias="replication.policy.class",
        description=(
            "how mirrors are named: link naming (names kept, plus the prefix; the default), "
            "`DefaultReplicationPolicy`, `IdentityReplicationPolicy` or a `module.Class`"
        ),
    )
    policy_separator: Annotated[str, BeforeValidator(values.separator)] = Field(
        ".",
        alias="replication.policy.separator",
        description=(
            "separator of `DefaultReplicationPolicy` names and of internal topic names (1-8 topic-name characters)"
        ),
    )
    offset_translation_mode: Annotated[Literal["exact", "timestamp"], BeforeValidator(values.lower)] = Field(
        "exact",
        alias="offset.translation.mode",
        description=(
            "`exact` (through the offset map) or `timestamp` (the first mirror record at or after the "
            "source record's timestamp)"
        ),
    )
    # Bounds one cycle per partition (and so a Dagster run); what is left is the next cycle's.
    unit_max_bytes: UnitMaxBytes = Field(
        1024 * 1024 * 1024,
        alias="mirror.unit.max.bytes",
        description="the most one partition copies in one cycle; what is left goes to the next cycle",
    )
    chunk_max_records: ChunkMaxRecords = Field(
        20000,
        alias="mirror.chunk.max.records",
        description="records per recorded progress step (one transaction of the copy)",
    )
    # What one copy task's record buffers may hold (consumer prefetch, chunk, producer queue).
    task_memory_bytes: TaskMemoryBytes = Field(
        values.DEFAULT_TASK_MEMORY_BYTES,
        alias="mirror.task.memory.bytes",
        description=(
            "what one copy task's record buffers may hold (consumer prefetch, the chunk in Python, the "
            "producer queue), whatever the partition's size"
        ),
    )
    alignment_max_records: AlignmentMaxRecords = Field(
        1_000_000,
        alias="mirror.log.start.alignment.max.records",
        description="largest source log start aligned with placeholders; past it, offsets are translated",
    )
    fence_wait_ms: FenceWaitMs = Field(
        16000,
        alias="mirror.writer.fence.wait.ms",
        description=(
            "how long a cycle waits for a fenced writer's last records before repairing; a copy task's "
            "chunk must land within half of it"
        ),
    )
    writer_slots: WriterSlots = Field(
        values.DEFAULT_WRITER_SLOTS,
        alias="mirror.writer.slots",
        description="writer identities partitions are fenced under, held by copy tasks; fixed while mirrors live",
    )
    state_topic: TopicName = Field(
        None,
        alias="mirror.state.topic",
        description=(
            "the destination's registry of mirrors, shared by the links into it (default `_mirror-pipeline<sep>state`)"
        ),
    )
    offset_map_topic: TopicName = Field(
        None,
        alias="mirror.offset.map.topic",
        description=(
            "the link's offset maps on the destination (default "
            "`_mirror-pipeline<sep><link><sep>offset-map`; a link whose state predates per-link topics "
            "keeps the shared `_mirror-pipeline<sep>offset-map`); cannot move while the link has live "
            "mirrors"
        ),
    )
    checkpoints_topic: TopicName = Field(
        None,
        alias="mirror.checkpoints.topic",
        description=(
            "the link's translated group positions on the destination (default "
            "`_mirror-pipeline<sep><link><sep>checkpoints`, or the shared name as for the offset map)"
        ),
    )
    heartbeats_topic: TopicName = Field(
        None, alias="mirror.heartbeats.topic", description="the heartbeats topic on the source"
    )
    lag_alert_records: LagAlertRecords = Field(
        0,
        alias="mirror.lag.alert.records",
        description="the lag sensor requests a run, and the `lag_under_threshold` check fails, above this lag",
    )
    # Heartbeats (R-OBS-3) are written on the source, so they need WRITE there: off unless asked
    # for, which keeps the source principal read-only (R-ACL-3). See `link.heartbeats`.
    heartbeats_enabled: Bool = Field(
        False,
        alias="emit.heartbeats.enabled",
        description=(
            "write heartbeats on the source and mirror them, for an end-to-end lag in time (needs WRITE on the source)"
        ),
    )
    heartbeats_interval_s: HeartbeatIntervalS = Field(
        1, alias="emit.heartbeats.interval.seconds", description="seconds between two heartbeats"
    )
    # The longest the link's copy asset may go without a recorded copy: its Dagster
    # freshness policy fails past it and warns past half of it (the UI's "stale").
    freshness_ms: FreshnessMs = Field(
        300000,
        alias="mirror.freshness.target.ms",
        description=(
            "the copy asset's Dagster freshness policy: stale (failing) when no mirror of the link was "
            "copied for this long, warning at half of it"
        ),
    )
    # The link's principal on the destination, for the read-only guard (R-ACL-3) when the
    # client settings cannot tell it (TLS client certificates, Kerberos, OAuth).
    link_principal: Annotated[str | None, BeforeValidator(values.principal)] = Field(
        None,
        alias="mirror.link.principal",
        description=(
            "the link's principal on the destination, for read-only mirrors when it cannot be told from "
            "`sasl.username` (TLS client certificates, Kerberos, OAuth)"
        ),
    )
    # The link's replicate schedule and its lag, health and auto-create sensors start
    # running as soon as Dagster loads the link (their default status); false: they
    # ship stopped and an operator turns them on. A toggle in the UI wins either way.
    automation_running: Bool = Field(
        False,
        alias="dagster.automation.running",
        description=(
            "the link's replicate schedule and its lag, health and auto-create sensors start running when "
            "Dagster loads the link"
        ),
    )
    # How often the lag sensor looks for lag and asks for a replicate run: with the runs
    # back to back, what bounds a sensor-driven link's recovery point besides the run itself.
    lag_sensor_interval_s: LagSensorIntervalS = Field(
        30,
        alias="dagster.lag.sensor.interval.seconds",
        description="how often the lag sensor looks for lag and asks for a run",
    )
    # The longest a replicate run may take: Dagster's run monitoring ends a run past it (a hung
    # run would hold the link's queue for good) and the lag sensor asks for the next one.
    run_max_runtime_s: RunMaxRuntimeS = Field(
        3600,
        alias="dagster.run.max.runtime.seconds",
        description=(
            "a replicate run still going after this long is ended by Dagster's run monitoring (its worker "
            "killed 30 s later if it hangs) and the next run goes on from where the mirrors end; 0: no "
            "bound"
        ),
    )

    def to_dict(self) -> dict[str, Any]:
        """Property-name keys, JSON-able values (filters in Cluster-Linking shape)."""
        out: dict[str, Any] = {}
        # Fields without a property name (source, destination) read best first.
        fields = sorted(type(self).model_fields.items(), key=lambda kv: kv[1].alias is not None)
        for attr, field in fields:
            if attr == "name":
                continue
            value = getattr(self, attr)
            if isinstance(value, NameFilters):
                value = value.to_json(_FILTER_LIST_KEYS[attr])
            elif isinstance(value, AclFilters):
                value = value.to_json()
            out[field.alias or attr] = copy.deepcopy(value)
        return out


def _rule(key: str, reason: str) -> PydanticCustomError:
    # `key` travels in the context so the message can name the offending property.
    return PydanticCustomError("link_rule", reason, {"key": key})


class LinkConfig(LinkSettings):
    """One replication flow `source -> destination`, with its settings resolved."""

    name: str
    source: str
    destination: str

    @model_validator(mode="after")
    def _check_rules(self) -> LinkConfig:
        if self.source == self.destination:
            raise _rule("destination", f"must differ from source (both are {values.show(self.source)})")
        if self.acl_sync_enable and self.prefix:
            raise _rule(
                "acl.sync.enable",
                "cannot be true on a link with cluster.link.prefix: synced ACLs would name the unprefixed topics",
            )
        if self.acl_sync_enable and self.acl_filters.is_empty:
            raise _rule("acl.filters", "at least one filter is required when acl.sync.enable is true")
        if self.group_prefix_enable and not self.prefix:
            raise _rule("consumer.group.prefix.enable", "needs cluster.link.prefix to be set")
        if self.auto_create_enable and self.auto_create_filters.is_empty:
            raise _rule(
                "auto.create.mirror.topics.filters",
                "at least one filter is required when auto.create.mirror.topics.enable is true",
            )
        try:
            load_policy_class(self.policy_class)
        except ConfigError as exc:
            raise _rule("replication.policy.class", str(exc)) from None
        names = self._internal_names()
        clash = values.internal_name_clash(names)
        if clash:
            raise _rule(*clash)
        for setting, (configured, name) in names.items():
            if configured is None and len(name) > values.TOPIC_NAME_MAX:
                raise _rule(
                    setting,
                    f"must be set: the default name '{name[:40]}...' the link's name gives it "
                    f"is longer than Kafka's {values.TOPIC_NAME_MAX} characters",
                )
        if self.prefix and names_mirrors_itself(self.policy_class):
            raise _rule(
                "cluster.link.prefix",
                f"cannot be combined with replication.policy.class '{self.policy_class}', which names mirrors itself",
            )
        if not self.auto_create_enable and not self.auto_create_filters.is_empty:
            # R-AC-4: turning auto-create off clears the filters, so nothing the
            # link no longer creates keeps blocking a mirror's deletion.
            object.__setattr__(self, "auto_create_filters", NameFilters())
        return self

    def _internal_names(self) -> dict[str, tuple[str | None, str]]:
        """Each internal topic setting: (its configured name or None, the name the link uses)."""
        defaults = ReplicationPolicy("", "", self.policy_separator, link=self.name)
        fields = type(self).model_fields
        return {
            (fields[attr].alias or attr): (getattr(self, attr), getattr(self, attr) or defaults.internal_topic(kind))
            for kind, attr in INTERNAL_TOPIC_SETTINGS.items()
        }


def check_defaults(raw: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    """Problems in `defaults:` and the keys they concern (left out of every link)."""
    try:
        LinkSettings.model_validate(dict(raw), by_alias=True, by_name=False)
    except ValidationError as exc:
        bad = {str(e["loc"][0]) for e in exc.errors(include_input=False) if e["loc"]}
        return validation_problems(exc, "defaults", LinkSettings), bad
    return [], set()


def build_link(name: str, raw: Mapping[str, Any], at: str) -> tuple[LinkConfig | None, list[str]]:
    """A validated link from its merged settings, or the problems found (paths under `at`)."""
    if "name" in raw:
        return None, [f"{at}: unknown key 'name' (a link is named by its key under links)"]
    try:
        link = LinkConfig.model_validate({**raw, "name": name}, by_alias=True, by_name=False)
    except ValidationError as exc:
        return None, validation_problems(exc, at, LinkConfig)
    return link, []
