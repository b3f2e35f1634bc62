"""Consumer-group I/O for offset sync: list, describe, read and commit offsets, record timestamps.

Committed offsets are read (and written, on the destination) by a consumer
created with `group.id=<group>` that never subscribes, so it never joins the
group: `committed()` is a plain OffsetFetch and `commit(offsets=...)` a
"simple consumer" OffsetCommit (generation -1), which the coordinator accepts
only while the group has no members. That keeps a commit into an active group
impossible even if a consumer joins between our describe and our commit.
`AdminClient.list_consumer_group_offsets` is not used in this process:
librdkafka 2.16 has crashed the process (segfault) in it while a group
coordinator was still loading, and a crash would take a Dagster run or a
promote down with it. `committed_offsets` runs it in a child process instead,
which also commits every group it can (the admin API's OffsetCommit is the
same "simple" one); these consumers read and commit what that child could not.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError

OFFSET_TIMEOUT_S = kc.REQUEST_TIMEOUT_S
# Group states in which no consumer holds the group's partitions.
INACTIVE_STATES = frozenset({"EMPTY", "DEAD", "UNKNOWN"})


def list_groups(admin, alias: str) -> list[str]:
    """Every consumer group the cluster knows, sorted."""
    with kc.kafka_errors(f"cluster '{alias}': listing consumer groups failed", ClusterUnreachable):
        listed = admin.list_consumer_groups(request_timeout=kc.REQUEST_TIMEOUT_S).result()
    return sorted({g.group_id for g in listed.valid})


def activity(admin, groups: Iterable[str], alias: str) -> dict[str, str | None]:
    """Per group: None when nobody consumes in it (offsets may be written), else why not.

    The reason reads "N active members", "group is <STATE>" (a group neither
    Empty nor Dead counts as active even with no member listed: a rebalance is
    about to hand out partitions) or "error: ...".
    """
    groups = sorted(set(groups))
    if not groups:
        return {}
    out: dict[str, str | None] = {}
    futures = admin.describe_consumer_groups(groups, request_timeout=kc.REQUEST_TIMEOUT_S)
    for group, fut in futures.items():
        try:
            desc = fut.result()
        except KafkaException as exc:
            not_found = kc.error_code(exc) == KafkaError.GROUP_ID_NOT_FOUND
            out[group] = None if not_found else f"error: describing the group on '{alias}' failed: {kc.error_name(exc)}"
            continue
        state = getattr(desc.state, "name", str(desc.state)).upper()
        members = len(desc.members or [])
        if members:
            out[group] = f"{members} active member{'s' if members != 1 else ''}"
        elif state not in INACTIVE_STATES:
            out[group] = f"group is {state}"
        else:
            out[group] = None
    return out


class GroupClient:
    """A non-joining consumer bound to one group on one cluster (see the module docstring)."""

    def __init__(self, conf: dict, group: str, alias: str):
        self.group, self.alias = group, alias
        self._cons = kc.consumer({**conf, "group.id": group, "enable.auto.commit": False})

    def __enter__(self) -> GroupClient:
        return self

    def __exit__(self, *_exc) -> None:
        self._cons.close()

    def committed(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Committed offsets of the group; partitions it never committed are left out."""
        wanted = [TopicPartition(t, p) for t, p in partitions]
        if not wanted:
            return {}
        deadline = time.monotonic() + OFFSET_TIMEOUT_S
        while True:
            try:
                got = self._cons.committed(wanted, timeout=OFFSET_TIMEOUT_S)
                break
            except KafkaException as exc:
                # COORDINATOR_LOAD_IN_PROGRESS and friends: the coordinator is settling.
                if not kc.is_retriable(exc) or time.monotonic() > deadline:
                    raise MirrorError(
                        f"cluster '{self.alias}': reading offsets of group '{self.group}' failed: {kc.error_name(exc)}"
                    ) from None
                time.sleep(0.2)
        out = {}
        for tp in got:
            if tp.error is not None:
                raise MirrorError(
                    f"cluster '{self.alias}': group '{self.group}' {tp.topic}[{tp.partition}]: {tp.error.str()}"
                )
            if tp.offset >= 0:
                out[(tp.topic, tp.partition)] = tp.offset
        return out

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        """Commit `offsets` synchronously; refused by the coordinator if the group has members."""
        if not offsets:
            return
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        with kc.kafka_errors(f"cluster '{self.alias}': committing offsets of group '{self.group}' failed"):
            done = self._cons.commit(offsets=tps, asynchronous=False)
        failed = [(tp, tp.error) for tp in done or [] if tp.error is not None]
        if failed:
            tp, err = failed[0]
            raise MirrorError(
                f"cluster '{self.alias}': committing offsets of group '{self.group}' failed for "
                f"{tp.topic}[{tp.partition}]: {err.str()}"
            )


def record_timestamps(
    conf: dict, positions: dict[tuple[str, int], int], alias: str
) -> dict[tuple[str, int], int | None]:
    """Timestamp of the first committed record at or after each position (None: there is none).

    A position below the log start (retention) reads from the log start, where
    the group's own consumer would resume too.
    """
    out: dict[tuple[str, int], int | None] = {}
    if not positions:
        return out
    cons = kc.consumer({**conf, "auto.offset.reset": "earliest"})
    try:
        for (topic, partition), position in sorted(positions.items()):
            _start, end = kc.watermark(cons, topic, partition)
            if position >= end:
                out[(topic, partition)] = None
                continue
            cons.assign([TopicPartition(topic, partition, position)])
            found = None
            deadline = time.monotonic() + OFFSET_TIMEOUT_S
            while found is None and time.monotonic() < deadline:
                for msg in cons.consume(1, 1.0):
                    err = msg.error()
                    if err is None:
                        found = msg.timestamp()[1]
                    elif err.code() != KafkaError._PARTITION_EOF:
                        raise MirrorError(f"cluster '{alias}': reading '{topic}' partition {partition}: {err.str()}")
                if cons.position([TopicPartition(topic, partition)])[0].offset >= end:
                    break  # only aborted data or markers up to the end
            out[(topic, partition)] = found
            cons.unassign()
    finally:
        cons.close()
    return out


def offsets_for_times(conf: dict, times: dict[tuple[str, int], int], alias: str) -> dict[tuple[str, int], int | None]:
    """Per partition: the first offset whose timestamp is at or after the given one (None: none)."""
    if not times:
        return {}
    cons = kc.consumer(conf)
    try:
        with kc.kafka_errors(f"cluster '{alias}': looking up offsets by timestamp failed"):
            got = cons.offsets_for_times(
                [TopicPartition(t, p, ts) for (t, p), ts in times.items()], timeout=OFFSET_TIMEOUT_S
            )
    finally:
        cons.close()
    out: dict[tuple[str, int], int | None] = {}
    for tp in got:
        if tp.error is not None:
            raise MirrorError(
                f"cluster '{alias}': offset by timestamp of '{tp.topic}' partition {tp.partition}: {tp.error.str()}"
            )
        out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
    return out
