"""Letting go of a producer at once, rather than whenever Python frees it.

A confluent-kafka client keeps its librdkafka threads and connections until
the Python object is freed. A traceback kept by a failed write (its frames
hold the writer) or a reference cycle delays that to a garbage collection, or
longer: a Spark worker that ran a follow-mode task fenced at its hand-over
still held that task's slot writers and producers (49 threads) when it took
its next task.
"""

from __future__ import annotations

import warnings
from contextlib import suppress

from confluent_kafka import KafkaException, Producer


def close_producer(producer: Producer) -> None:
    """Destroy `producer` now: whatever it still holds is dropped, as when it is freed.

    Purged first, since `close` would otherwise wait for records that cannot
    be delivered (20 s for a writer fenced mid-commit) and warn when it cannot
    abort a transaction its writer already gave up on.

    Raises nothing: it runs in `finally` blocks, after the failure that
    matters. A gap-less writer whose request was in flight fails fatally when
    the purge drops it, and confluent-kafka raises a fatal error from the next
    call that serves the client's events, `close` included (after destroying
    the client): raised here, it would hide why the write failed.
    """
    with suppress(KafkaException):  # a fenced producer's fatal error, raised again
        producer.purge(in_queue=True, in_flight=True)
    with warnings.catch_warnings(), suppress(KafkaException):
        warnings.simplefilter("ignore", RuntimeWarning)
        producer.close()
