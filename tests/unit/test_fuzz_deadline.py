"""The fuzz tests' per-case deadline fails a slow case without interrupting it."""

from __future__ import annotations

import logging
import random
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.fuzzing import time_limit


class Slow(BaseException):
    pass


def test_a_case_past_its_deadline_runs_to_its_end_and_then_fails():
    finished = []
    with pytest.raises(Slow, match="longer than 0.05s"), time_limit(0.05, Slow):
        time.sleep(0.2)
        finished.append(True)
    assert finished == [True]


def test_deadlines_falling_while_librdkafka_builds_clients_leave_no_stray_errors():
    # librdkafka calls the logger (as the config probe's) while it builds a client; a deadline
    # that raised from a signal handler there left a spurious TypeError or SystemError behind.
    silent = logging.getLogger(f"{__name__}.silent")
    silent.disabled = True
    rng = random.Random(7)
    outcomes: set[str] = set()
    for _ in range(300):
        conf = {"logger": silent, "debug": rng.choice(["all", "generic", "security,conf"])}
        client = rng.choice([Producer, Consumer])
        if client is Consumer:
            conf["group.id"] = "fuzz-deadline"
        try:
            with time_limit(rng.uniform(0.00001, 0.004)):
                built = client(conf)
                if isinstance(built, Consumer):
                    built.close()
                del built
            outcomes.add("built")
        except TimeoutError:
            outcomes.add("past its deadline")
    # Any other outcome (TypeError, SystemError) has failed the test by now; deadlines did fall.
    assert "past its deadline" in outcomes
