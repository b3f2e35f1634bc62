"""A copy task's memory: the budget split between the buffers that hold records, and measuring it.

See `MemoryPlan`. `rss` and `return_free_memory` let a task report its own
peak and hand freed memory back to the system between units (a Spark Python
worker is reused from task to task).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mirror_pipeline.config.setting_values import MIN_TASK_MEMORY_BYTES

if TYPE_CHECKING:  # loaded on first use (see `_glibc`)
    import ctypes

MiB = 1024 * 1024
# Memory one record costs beyond its key and value while it is held: the Python
# Message object, its bytes objects and its headers in the chunk, or librdkafka's
# message and op structures in the producer and consumer queues (measured on
# CPython 3.11 / librdkafka 2.16: 250-300 bytes; headers are counted here too).
RECORD_OVERHEAD_BYTES = 320
# librdkafka wants fetch.max.bytes at least message.max.bytes (its default, 1,000,000).
MIN_FETCH_BYTES = 1_000_000


@dataclass(frozen=True)
class MemoryPlan:
    """How a task's memory budget is split between the buffers that hold records.

    A record is held in at most three places at once: the consumer's prefetch
    queue, the chunk in Python (between reading and producing), and the
    producer's queue (until acknowledged; it holds one chunk at most, since
    each chunk is flushed before the next is read). Of the budget B:

    - chunk in Python: B/6 (key + value + RECORD_OVERHEAD_BYTES per record);
    - producer queue: B/6 (so one whole chunk fits: `queue.buffering.max.kbytes`,
      `queue.buffering.max.messages`);
    - consumer prefetch: B/8 (`queued.max.messages.kbytes`, and a record count,
      `queued.min.messages`, for small records) plus fetch responses of
      B/32 (`fetch.max.bytes`, `max.partition.fetch.bytes`);
    - freed memory the allocator keeps for reuse instead of handing it back
      and faulting it in again: B/16, at least two fetch responses (see
      `use_allocator_settings`);
    - the rest (over a quarter) is headroom: a fetch response in flight, the
      allocator's fragmentation, the clients' own buffers. Measured with a
      64 MiB budget, in workers reused after other copies: a task's resident
      memory grew by 33-38 MiB (with glibc's mmap threshold pinned, see
      `return_free_memory`, and the first request to the consumer bounded,
      see `ChunkReader._want`).

    Beyond the budget a task holds the Python process itself (interpreter,
    PySpark worker, pyarrow, confluent-kafka: ~100 MiB measured) and its
    clients' fixed buffers. A record larger than a buffer is still copied (a
    chunk always takes one record; Kafka always returns at least one record
    batch), so a topic whose records are near the budget's size needs a larger one.
    """

    budget: int
    chunk_bytes: int
    producer_queue_bytes: int
    producer_queue_messages: int
    consumer_queue_bytes: int
    consumer_queue_messages: int
    fetch_bytes: int
    allocator_retain_bytes: int
    allocator_mmap_threshold: int

    def reader_settings(self, readers: int = 1) -> dict[str, object]:
        """A consumer's buffers, when `readers` consumers share the prefetch (`split_reader`)."""
        fetch = max(MIN_FETCH_BYTES, self.fetch_bytes // readers)
        return {
            "queued.max.messages.kbytes": max(1, self.consumer_queue_bytes // readers // 1024),
            "queued.min.messages": max(1, self.consumer_queue_messages // readers),
            "fetch.max.bytes": fetch,
            "max.partition.fetch.bytes": fetch,
        }

    def writer_settings(self) -> dict[str, object]:
        return {
            "queue.buffering.max.kbytes": max(1, self.producer_queue_bytes // 1024),
            "queue.buffering.max.messages": self.producer_queue_messages,
        }


def memory_plan(budget: int, max_message_bytes: int, chunk_records: int) -> MemoryPlan:
    """Split `budget` bytes between a task's buffers (see MemoryPlan)."""
    budget = max(int(budget), MIN_TASK_MEMORY_BYTES)
    chunk = budget // 6
    # The producer's queue must take one whole chunk, and any record the mirror accepts.
    producer = max(chunk, max_message_bytes + 1024)
    consumer = budget // 8
    # librdkafka wants fetch.max.bytes >= message.max.bytes (1,000,000) and below
    # receive.message.max.bytes (100,000,000); 50 MiB was the setting before budgets.
    fetch = min(max(budget // 32, MIN_FETCH_BYTES), 50 * MiB)
    return MemoryPlan(
        budget=budget,
        chunk_bytes=chunk,
        producer_queue_bytes=producer,
        producer_queue_messages=max(1, min(chunk_records, chunk // RECORD_OVERHEAD_BYTES + 1)),
        consumer_queue_bytes=consumer,
        consumer_queue_messages=max(1000, min(100000, consumer // RECORD_OVERHEAD_BYTES)),
        fetch_bytes=fetch,
        allocator_retain_bytes=max(budget // 16, 2 * fetch),
        # A fetch response is a little over fetch.max.bytes; a produce request is one batch (<= 1 MB).
        allocator_mmap_threshold=min(fetch + MiB, MAX_MMAP_THRESHOLD_BYTES),
    )


def use_allocator_settings(plan: MemoryPlan) -> None:
    """Let glibc's malloc keep and reuse what this task frees, within its plan, until `return_free_memory`.

    Every record passes through a fetch response, a Python bytes object and a
    produce request. With the thresholds `return_free_memory` sets, each of
    those buffers came from memory the kernel had just handed out: copying
    1,000,000 records of 1 KiB took 948,000 page faults, a third of its
    workers' CPU. During a task, buffers up to a fetch response come from
    malloc's arenas, and each arena keeps up to `allocator_retain_bytes` free
    for the next chunk. The thresholds are the process's; a task's units are
    copied one after another or together in one thread (`group_copy`), so no
    unit puts the defaults back under another.
    """
    _set_thresholds(plan.allocator_mmap_threshold, plan.allocator_retain_bytes)


def free_what_the_task_left() -> None:
    """At a task's end: collect its reference cycles, then `return_free_memory`.

    A failed write's traceback holds the frames it went through, and with them
    the task's clients (an admin client cannot be closed in confluent-kafka
    2.16); in a cycle, they live until a collection. A worker idle between tasks
    allocates too little to start one: a follow-mode worker fenced at its
    hand-over took its next task beside the last one's clients (49 threads).
    The task ran with the collector off, so everything it made is in the
    youngest generation: collecting that one alone costs a few milliseconds
    where a full collection of a worker took about 60.
    """
    gc.collect(0)
    return_free_memory()


def return_free_memory() -> None:
    """Give the memory freed by earlier work back to the system (glibc's malloc_trim), where there is one.

    It also puts glibc's thresholds back at glibc's own defaults, pinned for the
    time between tasks. Left alone, glibc raises the mmap threshold each time a
    large block is freed, after which record-sized buffers (a 1 MB value, a
    fetch response) come from the heap arenas of whichever thread allocated
    them (librdkafka's broker threads, the task's). Freed there they stay
    resident, scattered, and a task in a reused worker was measured adding
    66-86 MiB against a 64 MiB budget. Pinned, every block over the threshold is
    its own mapping, returned the moment it is freed; a copy task then sets
    thresholds its plan bounds (`use_allocator_settings`).
    """
    _set_thresholds(DEFAULT_MMAP_THRESHOLD_BYTES, DEFAULT_TRIM_THRESHOLD_BYTES)
    libc = _glibc()
    if libc:
        libc.malloc_trim(0)


def _set_thresholds(mmap_threshold: int, trim_threshold: int) -> None:
    libc = _glibc()
    if libc:
        libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
        libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)


def _glibc() -> ctypes.CDLL | Literal[False]:
    """glibc, loaded once per process; False where there is none (its tuning is then left out)."""
    global _libc
    if _libc is None:
        try:
            import ctypes

            _libc = ctypes.CDLL("libc.so.6")
        except (OSError, AttributeError):
            _libc = False
    return _libc


# glibc's mallopt parameters and its defaults for them; it refuses an mmap
# threshold over 32 MiB on 64-bit systems.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
DEFAULT_MMAP_THRESHOLD_BYTES = DEFAULT_TRIM_THRESHOLD_BYTES = 128 * 1024
MAX_MMAP_THRESHOLD_BYTES = 32 * MiB
_libc: ctypes.CDLL | Literal[False] | None = None


def rss(reset_peak: bool = False) -> tuple[int, int]:
    """(resident, peak resident) bytes of this process from /proc; (-1, -1) where it cannot tell.

    With `reset_peak` the kernel's peak mark is first reset to the current
    resident size (Linux >= 4.0: `5` to /proc/self/clear_refs), so the peak read
    at the end of a unit is that unit's, not an earlier task's in a reused worker.
    """
    try:
        if reset_peak:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if line.startswith(("VmRSS", "VmHWM")))
        return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return -1, -1
