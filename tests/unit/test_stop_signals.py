"""Stop signals set an event from a thread of their own (`cli.signals`): a handler that set it itself could
wait for ever on the event's lock, held by the main thread it interrupted."""

from __future__ import annotations

import os
import signal
import threading

from mirror_pipeline.cli.signals import stop_on_signals

SIG = signal.SIGUSR2


def test_a_signal_sets_the_event_and_announces_once():
    stop, announced = threading.Event(), []
    with stop_on_signals(stop, (SIG,), announce=lambda: announced.append(threading.current_thread().name)):
        os.kill(os.getpid(), SIG)
        assert stop.wait(10)
        os.kill(os.getpid(), SIG)  # without `again`, a later signal changes nothing
    assert announced == ["signal-relay"]


def test_the_handler_returns_while_the_main_thread_holds_the_events_lock():
    stop = threading.Event()
    with stop_on_signals(stop, (SIG,)):
        handler = signal.getsignal(SIG)
        assert callable(handler)
        # As when the signal lands inside stop.wait(), between its taking the lock back and returning.
        with stop._cond:  # type: ignore[attr-defined]
            handler(SIG, None)  # a handler calling stop.set() would wait here for ever
        assert stop.wait(10)


def test_a_signal_once_stopping_calls_again_in_the_main_thread():
    stop, calls = threading.Event(), []
    with stop_on_signals(
        stop, (SIG,), again=lambda: calls.append(threading.current_thread() is threading.main_thread())
    ):
        handler = signal.getsignal(SIG)
        assert callable(handler)
        handler(SIG, None)
        assert stop.wait(10)
        handler(SIG, None)
    assert calls == [True]


def test_the_previous_handler_comes_back_and_the_relay_ends():
    before = signal.getsignal(SIG)
    with stop_on_signals(threading.Event(), (SIG,)):
        assert signal.getsignal(SIG) is not before
    assert signal.getsignal(SIG) is before
    assert not any(t.name == "signal-relay" for t in threading.enumerate())
