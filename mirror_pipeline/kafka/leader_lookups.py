"""Which partitions' leaders a client holds in its metadata, and one leader look-up at a time for the rest.

librdkafka (2.15 and 2.16) looks up the leaders of a ListOffsets or DeleteRecords
request's partitions on the calling thread first. When one is not in the
client's metadata, it registers the request to be looked up again at the next
metadata change and then, still on the calling thread, arms a retry timer. A
metadata answer that lands in between lets librdkafka's main thread finish the
request and clear the lock the calling thread is about to take: the process
dies of a segmentation fault (`pthread_mutex_lock` on a null lock, in
`rd_kafka_topic_partition_list_query_leaders_async_worker`). Any metadata answer
of the same client will do, and another request's own look-up is one. Requests
of 500 partitions sent side by side on a new admin client that knew one topic
killed 6 of 12 processes, each listing 10,000 partitions' offsets 60 times (a
copy task's worker died of it about one run in 40 on a link of 10,000 partitions).

A request whose every partition's leader is in the metadata registers nothing,
so it is safe beside anything. Requests go side by side only for partitions whose
leaders this module saw in one of the client's metadata answers or answered
requests within LEADERS_FRESH_S (librdkafka keeps metadata for 15 minutes by
default); any other request holds the client's look-up lock from the moment it
is sent until it is answered. With that, the same 12 processes: no crash.

One case stays open: a leader lost after it was noted (a broker that went down)
makes a side-by-side request look up again. Its answer fails, and the request is
asked again one at a time.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, wait
from contextlib import contextmanager
from typing import Any

# How long a noted leader counts as held in the client's metadata.
LEADERS_FRESH_S = 60.0


class _Book:
    """One client's look-up lock and its noted topics: name -> (partitions that have a leader, when noted)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.topics: dict[str, tuple[int, float]] = {}


_books: weakref.WeakKeyDictionary[Any, _Book] = weakref.WeakKeyDictionary()
_books_lock = threading.Lock()


# The book of clients that take no weak reference (confluent-kafka's Consumer and Producer,
# which send no ListOffsets of their own): nothing is noted in it, its lock serves them all.
_UNNOTED = _Book()


def _book(client: Any) -> _Book:
    with _books_lock:
        try:
            book = _books.get(client)
            if book is None:
                book = _books[client] = _Book()
        except TypeError:
            return _UNNOTED
        return book


def learned(client: Any, metadata: Any) -> None:
    """Note the topics of a metadata answer (`list_topics`) whose every partition has a leader."""
    now = time.monotonic()
    book = _book(client)
    if book is _UNNOTED:
        return
    for name, topic in metadata.topics.items():
        parts = topic.partitions
        if topic.error is None and parts and all(p.leader >= 0 and p.error is None for p in parts.values()):
            book.topics[name] = (len(parts), now)
        else:
            book.topics.pop(name, None)


def answered(client: Any, partitions: Iterable[tuple[str, int]]) -> None:
    """Note the partitions a request answered for: their leaders are in the client's metadata."""
    now = time.monotonic()
    book = _book(client)
    if book is _UNNOTED:
        return
    highest: dict[str, int] = {}
    for topic, partition in partitions:
        highest[topic] = max(highest.get(topic, -1), partition)
    for topic, top in highest.items():
        count = book.topics.get(topic, (0, 0.0))[0]
        book.topics[topic] = (max(count, top + 1), now)


def forget(client: Any, topics: Iterable[str]) -> None:
    """Forget what was noted of `topics` (a request for them failed: a leader may have moved or gone)."""
    book = _book(client)
    for topic in topics:
        book.topics.pop(topic, None)


def all_held(client: Any, partitions: Iterable[tuple[str, int]]) -> bool:
    """Whether every partition's leader was noted within LEADERS_FRESH_S (its request may go side by side)."""
    oldest = time.monotonic() - LEADERS_FRESH_S
    topics = _book(client).topics
    for topic, partition in partitions:
        count, noted = topics.get(topic, (0, 0.0))
        if partition >= count or noted < oldest:
            return False
    return True


@contextmanager
def one_at_a_time(client: Any) -> Iterator[None]:
    """Hold `client`'s look-up lock: no other request of this module's callers looks leaders up meanwhile."""
    with _book(client).lock:
        yield


def ask_offsets(admin: Any, wanted: dict[Any, Any], isolation: Any, timeout: float, batch: int) -> dict[Any, Future]:
    """ListOffsets futures for `wanted` ({TopicPartition: OffsetSpec}), `batch` partitions a request.

    The requests go side by side when every partition's leader is held in the
    client's metadata; otherwise one at a time under the client's look-up lock,
    each answered before the next is sent. Over 10,000 partitions one at a time
    took 35-55 ms longer (0.15-0.24 s against 0.12-0.18 s).
    """
    asked = list(wanted.items())
    batches = [dict(asked[i : i + batch]) for i in range(0, len(asked), batch)]
    futures: dict[Any, Future] = {}
    if all_held(admin, ((tp.topic, tp.partition) for tp in wanted)):
        for one in batches:
            futures.update(admin.list_offsets(one, isolation_level=isolation, request_timeout=timeout))
        return futures
    with one_at_a_time(admin):
        for one in batches:
            answers = admin.list_offsets(one, isolation_level=isolation, request_timeout=timeout)
            wait(answers.values())
            futures.update(answers)
    return futures
