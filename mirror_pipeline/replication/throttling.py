"""What a task's mirror writers learn of the destination throttling them (a produce quota).

A broker over a client's produce quota answers at once and then reads
nothing more from that connection for the throttle time: a request the
writer already sent waits there and is appended when the time is over, even
after the writer gave its records up (they missed their deadline) or died.
A chunk held that way past `mirror.writer.fence.wait.ms` lands after the
repair settled without it. The next cycle maps those records when they are
the source's next ones (`late_landing`), but a cycle that copied on before
they landed finds them behind its records, and flags the mirror
`FOREIGN_WRITE`: the link's own records counted as another writer's.
Nothing is lost, but the mirror stops, so a chunk that failed under a
throttle says so, naming the quota's client id and what to change.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

# Throttles older than this say nothing of a failure now (a follow-mode task lives for a whole epoch).
RECENT_S = 60.0


class ThrottleWatch:
    """The throttles the destination's brokers reported to a task's writers lately
    (librdkafka's `throttle_cb`, served by the writers' `poll` and `flush`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.client_id = ""
        self._recent: deque[tuple[float, int]] = deque()  # (when, throttle ms), oldest first
        self._lock = threading.Lock()  # a task's producers may be polled from more than one thread

    def __call__(self, event: Any) -> None:
        with self._lock:
            self._recent.append((self.clock(), int(event.throttle_time * 1000)))
            self._forget_old()

    @property
    def longest_ms(self) -> int:
        """The longest throttle reported in the last `RECENT_S` seconds (0: none)."""
        with self._lock:
            self._forget_old()
            return max((ms for _, ms in self._recent), default=0)

    def _forget_old(self) -> None:
        while self._recent and self._recent[0][0] < self.clock() - RECENT_S:
            self._recent.popleft()

    def watching(self, settings: dict[str, Any]) -> dict[str, Any]:
        """`settings` of a writer, with this watch as their throttle callback."""
        self.client_id = str(settings.get("client.id", ""))
        return {**settings, "throttle_cb": self}

    def why_late(self) -> str:
        """What to add to a write failure: '' when no broker throttled the writers lately."""
        longest = self.longest_ms
        if not longest:
            return ""
        return (
            f"; the destination throttled this link's writers for up to {longest} ms (a produce quota on "
            f"client id '{self.client_id}'), and records a broker holds back can land after "
            f"mirror.writer.fence.wait.ms, where the next cycle maps them only while nothing was copied after "
            f"them (else it flags the mirror FOREIGN_WRITE): raise the quota, or the fence wait above the throttle"
        )
