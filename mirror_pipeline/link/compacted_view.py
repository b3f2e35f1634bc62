"""The latest value per key of a compacted internal topic, kept per process and read incrementally.

Planning, `describe` and every sensor tick read the state and offset-map
topics; read from offset 0 each time, a cycle's fixed cost grew with the
link's history. Instead a process keeps, per (cluster, topic), the view it
last read (latest value per key, deleted keys removed) and the offset it read
up to, and each read fetches only the tail from there to the topic's end.

Invariants:
- A read returns the view of everything below an end taken during that read
  (`topic_end`, after the read started): never an older one. Fencing checks
  rely on that, as they relied on full reads.
- The view is of the topic as it is: when the topic was deleted and
  recreated (another topic id, or an end below the one read up to) it is read
  again from 0; a recreation while a read was under way makes it start over.
- No tombstone is missed: the log cleaner keeps a tombstone for at least the
  topic's `delete.retention.ms` after it was written, and everything past the
  view's end was written after its last read began; a view is read again from
  0 when its last read began more than half that long ago (an hour at most).
- A failed read leaves no half-merged view behind, and a forked child starts
  with no views (a lock held across a fork would never be released in it).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from mirror_pipeline.kafka.topic_configs import describe_topic_configs
from mirror_pipeline.link.topic_reading import SETTLE_TIMEOUT_S, read_topic, topic_end, topic_identity
from mirror_pipeline.model.errors import MirrorError

# Cap on how long a view is continued before it is read again from 0; the
# topic's delete.retention.ms (24 h by default) usually allows far longer.
MAX_VIEW_AGE_S = 3600.0
# A topic recreated during each of this many reads in a row is given up on.
READ_ATTEMPTS = 3


@dataclass
class CompactedView:
    """What a compacted topic holds below `end`: the latest value of each key still present.

    Pure bookkeeping (no I/O), so that merging, deleting and resetting are
    tested on their own; `read_compacted` feeds it.
    """

    topic_id: str | None = None
    end: int = 0  # offset read up to (exclusive)
    latest: dict[str, bytes] = field(default_factory=dict)
    read_started: float = float("-inf")  # monotonic time the last read began
    max_age_s: float = 0.0
    records_read: int = 0  # records merged since the view was made: how much reading it cost

    def continues(self, topic_id: str, end: int, now: float) -> bool:
        """Whether reading on from `self.end` gives the topic's view: the same
        topic, not gone back, and no tombstone past `self.end` cleaned away yet."""
        return (
            self.topic_id is not None
            and topic_id == self.topic_id
            and end >= self.end
            and now - self.read_started <= self.max_age_s
        )

    def reset(self, topic_id: str | None, max_age_s: float) -> None:
        self.topic_id, self.end, self.latest, self.max_age_s = topic_id, 0, {}, max_age_s
        self.read_started = float("-inf")

    def merge(self, records: Iterable[tuple[str, bytes | None, int]], end: int, read_started: float) -> None:
        """Apply the records of [self.end, end) in offset order: a value replaces, a tombstone (None) deletes."""
        for key, value, _offset in records:
            if value is None:
                self.latest.pop(key, None)
            else:
                self.latest[key] = value
            self.records_read += 1
        self.end = end
        self.read_started = read_started


@dataclass(frozen=True)
class ViewSnapshot:
    """A copy of a view: `latest` holds every key present below `end`."""

    latest: Mapping[str, bytes]
    end: int


class _Entry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.view = CompactedView()


_entries: dict[tuple[str, str], _Entry] = {}
_entries_lock = threading.Lock()


def _forget_all() -> None:
    global _entries, _entries_lock
    _entries, _entries_lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_all)


def cluster_key(properties: Mapping[str, object]) -> str:
    """Which cluster, as which principal: views are never shared between clients that
    connect differently (a digest, so no credential is kept in the key)."""
    text = json.dumps(sorted((str(k), str(v)) for k, v in properties.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def view_of(cluster: str, topic: str) -> CompactedView:
    """This process's view of `topic` (for tests and benchmarks that count what reads cost)."""
    return _entry(cluster, topic).view


def forget(cluster: str | None = None, topic: str | None = None) -> None:
    """Drop this process's views (all, or one cluster's, or one topic's): the next read starts from 0."""
    with _entries_lock:
        for key in [k for k in _entries if cluster in (None, k[0]) and topic in (None, k[1])]:
            del _entries[key]


def _entry(cluster: str, topic: str) -> _Entry:
    with _entries_lock:
        return _entries.setdefault((cluster, topic), _Entry())


def read_compacted(
    conf: dict[str, Any],
    admin: AdminClient,
    topic: str,
    alias: str,
    cluster: str,
    settle_timeout: float = SETTLE_TIMEOUT_S,
) -> ViewSnapshot | None:
    """The latest value per key of the single-partition compacted `topic`, up to its settled
    end (see `topic_end`, which waits at most `settle_timeout` for a transaction open on it);
    None when the topic does not exist. Reads only what this process has not read yet."""
    entry = _entry(cluster, topic)
    # One reader at a time per view: a second one waits, then reads only what is newer.
    with entry.lock:
        view = entry.view
        for _ in range(READ_ATTEMPTS):
            started = time.monotonic()
            identity = topic_identity(admin, topic, alias)
            if identity is None:
                view.reset(None, 0.0)
                return None
            end = topic_end(admin, topic, alias, timeout=settle_timeout)
            if not view.continues(identity, end, started):
                view.reset(identity, _max_age_s(admin, topic, alias))
            try:
                view.merge(read_topic(conf, admin, topic, alias, start=view.end, end=end), end, started)
            except BaseException:
                view.reset(None, 0.0)  # part of a tail merged, the end not moved: never reuse that
                raise
            if topic_identity(admin, topic, alias) == identity:
                return ViewSnapshot(dict(view.latest), view.end)
            view.reset(None, 0.0)  # recreated while read: the records may come from both topics
        raise MirrorError(
            f"cluster '{alias}': internal topic '{topic}' was recreated while it was being read, "
            f"{READ_ATTEMPTS} times in a row; nothing was decided from it. Retry"
        )


def _max_age_s(admin: AdminClient, topic: str, alias: str) -> float:
    """How long a view of `topic` may be continued (0: read it from 0 every time)."""
    try:
        retention_ms = int(describe_topic_configs(admin, topic, alias).get("delete.retention.ms", 0))
    except (MirrorError, ValueError):
        return 0.0  # unknown: every read starts from 0, as reads always did
    return min(MAX_VIEW_AGE_S, retention_ms / 2000.0)
