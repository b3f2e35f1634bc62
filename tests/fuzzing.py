"""What the fuzz tests share: a per-case deadline."""

from __future__ import annotations

import faulthandler
import time
from contextlib import contextmanager


@contextmanager
def time_limit(seconds: float, error: type[BaseException] = TimeoutError):
    """Raise `error` after a case that ran longer than `seconds` (a hang is a finding).

    The deadline interrupts nothing. An exception raised from a signal handler lands
    wherever the interpreter next checks for signals, and with librdkafka that can be
    inside a callback it makes while a client is built (the config probe's logger) or
    inside C code of the interpreter's own: the exception is left pending where nothing
    expects one, the next property read fails with a spurious TypeError, and once a test
    worker aborted outright ("Fatal Python error: Aborted"), which left `--dist loadgroup`
    waiting for it forever. So past the deadline every thread's stack is printed (where
    the case was when it ran out of time) and the case fails once it returns; a case that
    never returns is ended by pytest-timeout.
    """
    started = time.monotonic()
    faulthandler.dump_traceback_later(seconds)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
    elapsed = time.monotonic() - started
    if elapsed > seconds:
        raise error(f"a case ran {elapsed:.1f}s, longer than {seconds}s (every thread's stack is printed above)")
