"""What the fuzz tests share: a per-case deadline."""

from __future__ import annotations

import signal
from contextlib import contextmanager


@contextmanager
def time_limit(seconds: float, error: type[BaseException] = TimeoutError):
    """Raise `error` in the case when it runs longer than `seconds` (a hang is a finding)."""

    def hang(signum, frame):
        raise error(f"a case ran longer than {seconds}s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
