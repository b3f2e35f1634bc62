"""Every committed offset of many consumer groups at once, read in a child process.

`GroupClient.committed` (a consumer's OffsetFetch) must name the partitions
it asks about: on a link of 10,000 partitions a sync asked each group for
all of them, on both clusters, about 0.8 s a request, and 1,000 groups took
over 13 minutes. An OffsetFetch without partitions answers with a group's
committed offsets whole; librdkafka sends one through
`AdminClient.list_consumer_group_offsets` (1,000 groups in about 0.5 s here).
But librdkafka's handling of a NOT_COORDINATOR answer to it dereferences a
group handle the admin client does not have, and the process crashes
(librdkafka issue #5040; seen here with 2.16 while a coordinator was still
loading). So that call runs in a child process: a crash loses the child only,
and the sync falls back to asking each group for the link's partitions.

The same child commits offsets for many groups at once
(`commit_if_unchanged`): a consumer per group to commit cost about 8 ms of the
two cores, 1,000 groups most of a first sync. It lists the groups again and
commits, through `AdminClient.alter_consumer_group_offsets` (a "simple"
OffsetCommit, which the coordinator refuses while a group has members), only
for a group whose offsets are still those its commit was decided from.

The request (client settings, secrets included) goes to the child on its
standard input, never on its command line; the answer comes back as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from mirror_pipeline.kafka import clients as kc

log = logging.getLogger(__name__)

Offsets = dict[tuple[str, int], int]  # (topic, partition) -> committed offset
# What a commit was decided from: the group's committed offset per partition (None: none committed).
Expected = dict[tuple[str, int], int | None]
# Admin clients (connections) the child commits through. A broker answers one connection's requests
# one at a time, and its group coordinator holds each offset commit for its append linger (5 ms by
# default): through one connection 1,000 groups took 6.1 s, through 16 0.5 s (8: 0.85 s).
COMMIT_CONNECTIONS = 16


def committed_offsets(admin_conf: dict, groups: Sequence[str], alias: str, timeout_s: float) -> dict[str, Offsets]:
    """{group: its committed offsets} for the groups the child could read; a group it could not
    (or every group, when the child failed) is left out, for the caller to ask one by one."""
    if not groups:
        return {}
    answer = _ask_child(admin_conf, {"groups": list(groups)}, alias, timeout_s, "listing committed offsets", "read")
    try:
        return {
            group: {(topic, partition): offset for topic, partition, offset in rows} for group, rows in answer.items()
        }
    except (ValueError, TypeError, AttributeError):  # not the child's answer (something else wrote to its stdout)
        log.warning(
            "cluster '%s': listing committed offsets gave no readable answer; groups are read one by one", alias
        )
        return {}


def commit_if_unchanged(
    admin_conf: dict, commits: dict[str, tuple[Expected, Offsets]], alias: str, timeout_s: float
) -> set[str]:
    """Commit each group's offsets (`commits`: group -> (what its commit was decided from, what to
    commit)) where its committed offsets are still the expected ones; returns the groups committed.
    Any other group (changed, refused, or every group when the child failed) is left to the caller."""
    if not commits:
        return set()
    request = {
        "parent": os.getpid(),
        "commits": {
            group: {
                "expected": [[t, p, o] for (t, p), o in sorted(expected.items())],
                "offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())],
            }
            for group, (expected, offsets) in commits.items()
        },
    }
    answer = _ask_child(admin_conf, request, alias, timeout_s, "committing offsets", "committed")
    if not isinstance(answer, list) or not all(isinstance(g, str) for g in answer):
        if answer:  # not the child's answer
            log.warning(
                "cluster '%s': committing offsets gave no readable answer; groups are committed one by one", alias
            )
        return set()
    return set(answer) & set(commits)


def _ask_child(admin_conf: dict, request: dict, alias: str, timeout_s: float, what: str, fallback: str):
    """The child's JSON answer to `request` ({} when there is none: the caller does the work itself)."""
    try:
        text = json.dumps({"conf": admin_conf, "timeout_s": timeout_s, **request})
    except TypeError:  # a setting that is not plain data (a callback): the child cannot have it
        return {}
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__], input=text, capture_output=True, text=True, timeout=timeout_s + 30
        )
    except subprocess.TimeoutExpired:
        log.warning(
            "cluster '%s': %s took over %.0f s; groups are %s one by one", alias, what, timeout_s + 30, fallback
        )
        return {}
    if done.returncode != 0:
        log.warning(
            "cluster '%s': %s failed (exit code %d); groups are %s one by one", alias, what, done.returncode, fallback
        )
        return {}
    try:
        return json.loads(done.stdout)
    except ValueError:
        log.warning("cluster '%s': %s gave no readable answer; groups are %s one by one", alias, what, fallback)
        return {}


def _child() -> None:
    """The child's side: read the request, list (or commit) offsets, print the answer."""
    request = json.load(sys.stdin)
    admin = kc.admin_client(request["conf"])
    deadline = time.monotonic() + request["timeout_s"]
    if "commits" in request:
        more = min(COMMIT_CONNECTIONS, len(request["commits"])) - 1  # a connection a group at most
        committers = [admin] + [kc.admin_client(request["conf"]) for _ in range(more)]
        json.dump(_commit_unchanged(committers, request["commits"], request["parent"], deadline), sys.stdout)
    else:
        json.dump(_listed(admin, request["groups"], deadline), sys.stdout)


def _listed(admin, groups: Sequence[str], deadline: float) -> dict[str, list]:
    """{group: [[topic, partition, offset], ...]} for every group listed by `deadline`."""
    pending, found = list(groups), {}
    while pending and time.monotonic() < deadline:
        futures = {
            group: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=kc.REQUEST_TIMEOUT_S
            )[group]
            for group in pending
        }
        pending = []
        for group, future in futures.items():
            try:
                listed = future.result()
            except KafkaException as exc:
                if kc.is_retriable(exc):  # a coordinator still loading, say
                    pending.append(group)
                continue  # any other error: left out, the parent asks this group itself
            found[group] = [
                [tp.topic, tp.partition, tp.offset]
                for tp in listed.topic_partitions
                if tp.error is None and tp.offset >= 0
            ]
        if pending:
            time.sleep(0.2)
    return found


def _commit_unchanged(committers: list, commits: dict[str, dict], parent: int, deadline: float) -> list[str]:
    """The groups whose offsets were committed: those listed now as their commit expects. None once
    `parent` is gone: a sync killed meanwhile (a failover's, say) commits nothing after its death."""
    now = _listed(committers[0], list(commits), deadline)
    unchanged = []
    for group, rows in now.items():
        current = {(t, p): o for t, p, o in rows}
        if all(current.get((t, p)) == o for t, p, o in commits[group]["expected"]):
            unchanged.append(group)
    if os.getppid() != parent:
        return []
    futures = {
        group: committers[i % len(committers)].alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for t, p, o in commits[group]["offsets"]])],
            request_timeout=kc.REQUEST_TIMEOUT_S,
        )[group]
        for i, group in enumerate(unchanged)
    }
    done = []
    for group, future in futures.items():
        try:
            altered = future.result()
        except KafkaException:
            continue  # refused (members joined, say): the parent commits this group itself, and reports why not
        if all(tp.error is None for tp in altered.topic_partitions):
            done.append(group)
    return sorted(done)


if __name__ == "__main__":
    _child()
