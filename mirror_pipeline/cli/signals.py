"""Stop signals that set a `threading.Event`, without ever setting it from the signal handler.

Python runs a signal handler in the main thread, between two of its bytecodes.
A handler that called `stop.set()` itself could land while the main thread was
inside `stop.wait(...)` holding the event's lock (re-taken when the wait times
out, until it returns): `set()` then waits for a lock its own thread holds, for
ever. The process ignored every further SIGTERM and printed nothing: the fault
suite met it once in hundreds of follow-mode stops. So the handler only writes
a byte to a pipe (no lock), and a thread of its own sets the event.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator


@contextlib.contextmanager
def stop_on_signals(
    stop: threading.Event,
    signals: Iterable[signal.Signals],
    announce: Callable[[], None] | None = None,
    again: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Until the block ends, the first of `signals` sets `stop` and then calls `announce`, both in a
    thread of their own. With `again`, a signal that comes once `stop` is set, or while the first is
    being passed on, calls it in the main thread instead (it may raise, KeyboardInterrupt say)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    received: list[int] = []  # list.append takes no lock a handler could wait on

    def handler(signum: int, _frame: object) -> None:
        if again is not None and (received or stop.is_set()):  # is_set reads a flag: no lock
            again()
            return
        received.append(signum)
        with contextlib.suppress(BlockingIOError):  # a full pipe already has a signal to pass on
            os.write(write_end, b"s")

    def pass_on() -> None:
        while os.read(read_end, 64):  # b"" once the block has ended
            if not stop.is_set():
                stop.set()
                if announce is not None:
                    announce()

    relay = threading.Thread(target=pass_on, name="signal-relay", daemon=True)
    relay.start()
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
        os.close(write_end)
        relay.join(5)
        os.close(read_end)
