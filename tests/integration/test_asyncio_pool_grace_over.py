"""The asyncio pool's grace runs out while an attempt's outcome is being recorded: the
attempt ends once its outcome is written, before the worker gives back what it still
holds (review L6). Else that task went back to its queue while its outcome was being
written, and another worker could run it again."""
from __future__ import annotations

import threading
import time
from typing import Any, List

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.worker.loop_acks import LoopAcks
from minitask.worker.pools import coroutines

pytestmark = [pytest.mark.integration, pytest.mark.app("graceover", on="server")]

DEADLINE = 60.0


def test_a_cancel_at_the_end_of_the_grace_waits_for_the_outcome_being_recorded(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coroutines, "CANCEL_WAIT", DEADLINE)

    @app.task
    async def quick() -> int:
        return 1

    worker = app.worker(pool="asyncio", concurrency=2, grace=0.0)
    recording, recorded = threading.Event(), threading.Event()
    finish = worker._outcomes.finish

    def slow_finish(*args: Any) -> str:  # a round trip held up for a second
        recording.set()
        time.sleep(1.0)
        try:
            return finish(*args)
        finally:
            recorded.set()

    given_back: List[bool] = []  # per release_all: whether the outcome was written by then
    release_all = worker._leases.release_all

    def watched_release_all() -> None:
        given_back.append(recorded.is_set())
        release_all()

    monkeypatch.setattr(worker._outcomes, "finish", slow_finish)
    # the recording threads' path (test_asyncio_loop_acks_grace_over.py: the loop's)
    monkeypatch.setattr(LoopAcks, "takes", lambda self, message: False)
    monkeypatch.setattr(worker._leases, "release_all", watched_release_all)
    handle = quick.delay()
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert recording.wait(DEADLINE), "the attempt never came to record its outcome"
        worker.stop()  # grace 0: over at once, with the outcome on its way
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive(), "the worker did not end"
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert given_back == [True], "the shutdown gave back leases before the outcome was written"
    assert handle.status() == "succeeded"
    keys = queue_keys("graceover", "default")
    client = app.broker.client
    assert [client.llen(ready) for ready in keys.ready] == [0] * len(keys.ready), (
        "the task went back to its queue while its outcome was being written")
    assert client.zcard(keys.leases) == 0
