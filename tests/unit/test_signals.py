"""SignalRelay: handlers only note and ring; the relay thread acts."""
from __future__ import annotations

import os
import signal
import threading
from typing import List

from minitask.worker.signals import SignalRelay
from minitask.worker.stop import Stop


def test_a_signal_is_acted_on_in_the_relay_thread_and_restore_puts_back_the_handlers() -> None:
    heard: List[str] = []
    threads: List[str] = []
    done = threading.Event()

    def act(name: str) -> None:
        heard.append(name)
        threads.append(threading.current_thread().name)
        done.set()

    previous = signal.getsignal(signal.SIGTERM)
    restore = SignalRelay(act, lambda: None).install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert done.wait(10), "the relay acted on SIGTERM"
    finally:
        restore()
    assert heard == ["SIGTERM"]
    assert threads == ["minitask-signals"]
    assert signal.getsignal(signal.SIGTERM) == previous


def test_a_second_sigint_calls_at_once_in_the_handler() -> None:
    at_once: List[str] = []
    acted = threading.Event()
    restore = SignalRelay(lambda name: acted.set(), lambda: at_once.append("now")).install()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert at_once == []
        os.kill(os.getpid(), signal.SIGINT)
        assert at_once == ["now"]  # handlers run before os.kill returns to this thread
        assert acted.wait(10)
    finally:
        restore()


def test_a_signal_that_interrupts_event_set_does_not_wait_for_its_lock() -> None:
    """The handler runs in the main thread, between two bytecodes of whatever it
    interrupted; holding the lock ``Event.set()`` takes stands for a handler that
    interrupted ``set()`` itself (a second signal). Setting the Event from the handler
    would wait for that lock forever; the relay thread waits for it instead."""
    stop = Stop()
    restore = stop.install_signals()
    try:
        with stop.event._cond:  # type: ignore[attr-defined]
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, in this thread
            assert not stop.is_set()
        assert stop.event.wait(10), "the relay set the stop once the lock was free"
        assert stop.reason == "SIGTERM"
    finally:
        restore()
