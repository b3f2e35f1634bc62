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

The request (client settings, secrets included) goes to the child on its
standard input, never on its command line; the answer comes back as JSON.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

from mirror_pipeline.kafka import clients as kc

log = logging.getLogger(__name__)

Offsets = dict[tuple[str, int], int]  # (topic, partition) -> committed offset


def committed_offsets(admin_conf: dict, groups: Sequence[str], alias: str, timeout_s: float) -> dict[str, Offsets]:
    """{group: its committed offsets} for the groups the child could read; a group it could not
    (or every group, when the child failed) is left out, for the caller to ask one by one."""
    if not groups:
        return {}
    try:
        request = json.dumps({"conf": admin_conf, "groups": list(groups), "timeout_s": timeout_s})
    except TypeError:  # a setting that is not plain data (a callback): the child cannot have it
        return {}
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__], input=request, capture_output=True, text=True, timeout=timeout_s + 30
        )
    except subprocess.TimeoutExpired:
        log.warning(
            "cluster '%s': listing committed offsets took over %.0f s; groups are read one by one",
            alias,
            timeout_s + 30,
        )
        return {}
    if done.returncode != 0:
        log.warning(
            "cluster '%s': listing committed offsets failed (exit code %d); groups are read one by one",
            alias,
            done.returncode,
        )
        return {}
    try:
        answer = json.loads(done.stdout)
        return {
            group: {(topic, partition): offset for topic, partition, offset in rows} for group, rows in answer.items()
        }
    except (ValueError, TypeError, AttributeError):  # not the child's answer (something else wrote to its stdout)
        log.warning(
            "cluster '%s': listing committed offsets gave no readable answer; groups are read one by one", alias
        )
        return {}


def _list_in_child() -> None:
    """The child's side: read the request, list every group's offsets, print them."""
    request = json.load(sys.stdin)
    admin = kc.admin_client(request["conf"])
    deadline = time.monotonic() + request["timeout_s"]
    pending, found = list(request["groups"]), {}
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
    json.dump(found, sys.stdout)


if __name__ == "__main__":
    _list_in_child()
