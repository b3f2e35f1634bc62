"""A token bucket for a verify's read rate, so that a verify does not starve replication.

Pure: the clock and the sleep are injected (tests drive them by hand).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """At most `rate` bytes per second on average, with bursts of up to `burst` bytes.

    `take(n)` is called after reading n bytes: it sleeps until the bucket has
    paid for them. A batch bigger than the bucket is paid for in debt, so the
    average holds whatever the batch sizes.
    """

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate)
        # A quarter of a second's worth: smooth enough, and few sleeps.
        self.burst = float(burst) if burst is not None else max(1.0, self.rate / 4)
        self._clock, self._sleep = clock, sleep
        self._tokens = self.burst
        self._last = clock()
        self.slept = 0.0

    def take(self, n: int) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= n
        if self._tokens < 0:
            wait = -self._tokens / self.rate
            self._sleep(wait)
            self.slept += wait
            self._last = self._clock()
            self._tokens = 0.0


class NoThrottle:
    """The bucket when no rate is set."""

    slept = 0.0

    def take(self, n: int) -> None:
        pass


def per_task_rate(total_bytes_per_second: int | None, concurrent_tasks: int) -> float | None:
    """Each task's share of the link's read rate: the tasks that run at once split it."""
    if not total_bytes_per_second:
        return None
    return total_bytes_per_second / max(1, concurrent_tasks)


def bucket(rate: float | None) -> TokenBucket | NoThrottle:
    return TokenBucket(rate) if rate else NoThrottle()
