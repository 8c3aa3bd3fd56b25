"""The asyncio pool's hops to its recording threads and back are its main cost per
task beside the thread pool (issue 36): no more recording threads than slots (each
slot has one step in flight at a time; more threads only contend for the interpreter
lock), and steps that end together wake the loop once."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, List

import pytest

from minitask.worker.pools.coroutines import AsyncioPool
from minitask.worker.pools.recording import RecordingThreads


def _recording_threads() -> List[threading.Thread]:
    return [thread for thread in threading.enumerate()
            if thread.name.startswith("minitask-record-")]


@pytest.mark.parametrize("size, threads", [(1, 1), (2, 2), (4, 4), (16, 4)])
def test_no_more_recording_threads_than_slots(size: int, threads: int) -> None:
    none: Any = None
    before = set(_recording_threads())
    pool = AsyncioPool(size, none, none, none)
    try:
        made = [thread for thread in _recording_threads() if thread not in before]
        assert len(made) == threads
    finally:
        pool.close()


def test_steps_ending_before_the_loop_takes_them_wake_it_once() -> None:
    loop = asyncio.new_event_loop()
    calls: List[Any] = []
    threadsafe = loop.call_soon_threadsafe

    def counted(callback: Any, *args: Any) -> Any:
        calls.append(callback)
        return threadsafe(callback, *args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    recording = RecordingThreads(loop, 2)
    answered = [threading.Event(), threading.Event()]
    answer = recording._answer

    def noted(ends: Any, result: Any, error: Any) -> None:
        answer(ends, result, error)
        answered[result].set()

    recording._answer = noted  # type: ignore[method-assign]
    try:
        # the loop is not running: both steps end before it can take either
        futures = [recording.run(lambda index=index: index) for index in (0, 1)]
        for event in answered:
            assert event.wait(10), "a recording step never ended"
        results = loop.run_until_complete(asyncio.wait_for(asyncio.gather(*futures), 10))
        assert results == [0, 1]
        assert len(calls) == 1, "each step's end woke the loop on its own"
    finally:
        recording.close()
        loop.close()


def test_a_step_ending_after_a_delivery_wakes_the_loop_again() -> None:
    loop = asyncio.new_event_loop()
    recording = RecordingThreads(loop, 1)
    try:
        for value in range(3):
            assert loop.run_until_complete(asyncio.wait_for(
                recording.run(lambda value=value: value), 10)) == value
    finally:
        recording.close()
        loop.close()
