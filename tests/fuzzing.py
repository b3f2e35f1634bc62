"""What the fuzz tests share: a per-case deadline, and a note of the case in hand."""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def case_file(session_pid: int, worker: str) -> Path:
    """Where the fuzz tests of one test session's worker note the case they are about to run."""
    return Path(tempfile.gettempdir()) / f"mirror-pipeline-fuzz-case-{session_pid}-{worker}.txt"


def _own_case_file() -> Path:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # A pytest-xdist worker is a child of the session's process, which reads the note if it dies.
    return case_file(os.getppid(), worker) if worker else case_file(os.getpid(), "main")


def note_case(text: str) -> None:
    """Note the case about to run. A case that takes the whole worker down (the config probe's
    librdkafka aborted twice in the unit suite, on cases never seen since) leaves no report;
    `conftest.pytest_handlecrashitem` shows this note beside the crash instead."""
    _own_case_file().write_text(text, errors="backslashreplace")


def described(case: object) -> str:
    """`repr(case)`, huge integers included (Python refuses to write one of over 4,300 digits)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return repr(case)
    finally:
        sys.set_int_max_str_digits(limit)


def forget_case() -> None:
    """The fuzz test ended in Python's hands: no note is needed."""
    _own_case_file().unlink(missing_ok=True)


@contextmanager
def time_limit(seconds: float, error: type[BaseException] = TimeoutError):
    """Raise `error` after a case that ran longer than `seconds` (a hang is a finding).

    The deadline interrupts nothing. An exception raised from a signal handler lands
    wherever the interpreter next checks for signals, and with librdkafka that can be
    inside a callback it makes while a client is built (the config probe's logger) or
    inside C code of the interpreter's own: the exception is left pending where nothing
    expects one, and the next property read fails with a spurious TypeError or
    SystemError (`tests/unit/test_fuzz_deadline.py`). So past the deadline every thread's
    stack is printed (where the case was when it ran out of time) and the case fails once
    it returns; a case that never returns is ended by pytest-timeout.
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
