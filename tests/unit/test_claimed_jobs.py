"""A task leased with an outcome (ack_fetch) is the next task of the thread that
recorded the outcome: no other thread takes it, and a stop gives it back."""
from __future__ import annotations

import threading
from typing import List, Optional

from minitask.stores.queue import Delivery
from minitask.worker.leases import Holdings, Job


def jobs(*ids: str) -> List[Job]:
    return [Job("default", Delivery(task_id, b"", 1, 5)) for task_id in ids]


def in_thread(holdings: Holdings, stop: threading.Event) -> Optional[Job]:
    found: List[Optional[Job]] = []
    thread = threading.Thread(target=lambda: found.append(holdings.next_buffered(stop)))
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()
    return found[0]


def test_the_claimed_task_goes_to_its_thread_the_rest_to_any() -> None:
    holdings, stop = Holdings(), threading.Event()
    assert holdings.hold("default", jobs("a", "b", "c"), claim=True)

    other = in_thread(holdings, stop)
    assert other is not None and other.task_id == "b", "another thread takes the buffer"
    mine = holdings.next_buffered(stop)
    assert mine is not None and mine.task_id == "a", "the claiming thread gets its own"
    last = in_thread(holdings, stop)
    assert last is not None and last.task_id == "c"
    assert in_thread(holdings, stop) is None
    assert holdings.next_buffered(stop) is None


def test_a_claimed_task_is_held_and_given_back_with_the_buffer() -> None:
    holdings, stop = Holdings(), threading.Event()
    holdings.hold("default", jobs("a", "b"), claim=True)
    assert sorted(task_id for task_id, _ in holdings.held()) == ["a", "b"]

    given_back = holdings.take_buffered()  # a stop: what has not started goes back
    assert sorted(job.task_id for job in given_back) == ["a", "b"]
    assert holdings.held() == []
    assert holdings.next_buffered(stop) is None


def test_no_claimed_task_is_handed_out_once_stopping() -> None:
    holdings, stop = Holdings(), threading.Event()
    holdings.hold("default", jobs("a"), claim=True)
    stop.set()
    assert holdings.next_buffered(stop) is None
    assert [task_id for task_id, _ in holdings.take_unfinished()] == ["a"]
