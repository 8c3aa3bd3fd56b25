"""The cancel board's stop event: a threading.Event whose condition is made only
when it is first set or waited on, behaving as a plain Event does."""
from __future__ import annotations

import threading
import time

from minitask.worker.cancels import CancelBoard, _StopEvent


def test_it_is_an_event_that_starts_clear_and_times_out() -> None:
    event = _StopEvent()
    assert isinstance(event, threading.Event)
    assert not event.is_set()
    assert event.wait(0.001) is False


def test_a_set_from_another_thread_wakes_a_waiter() -> None:
    event = _StopEvent()
    woke = []
    waiter = threading.Thread(target=lambda: woke.append(event.wait(30)))
    waiter.start()
    time.sleep(0.01)  # let it block (it wakes either way: the set is remembered)
    event.set()
    waiter.join(timeout=30)
    assert woke == [True] and event.is_set() and event.wait(0) is True
    event.clear()
    assert not event.is_set()


def test_the_board_sets_a_running_attempts_event_and_calls_its_stopper() -> None:
    board = CancelBoard()
    stopped = []
    event = board.enter("t1", lambda: stopped.append("t1"))
    assert isinstance(event, _StopEvent) and not event.is_set()
    assert board.request("t1", held=False) is True
    assert event.is_set() and stopped == ["t1"]
    board.leave("t1")
    assert board.request("t1", held=False) is False
