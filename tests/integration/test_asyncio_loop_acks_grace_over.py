"""The asyncio pool records a plain success from its event loop (worker/loop_acks.py):
the grace running out while that round trip is on its way must not end the attempt
before its outcome is written, nor give its lease back meanwhile; and the task the
round trip leased goes back to its queue, leased to nobody never."""
from __future__ import annotations

import threading
from typing import List, Tuple

import pytest

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.stores.scripts import source
from minitask.worker import loop_acks
from minitask.worker.pools import coroutines

pytestmark = [pytest.mark.integration, pytest.mark.app("loopgrace", on="server")]

DEADLINE = 60.0


def test_the_grace_over_during_the_loops_round_trip_waits_for_the_outcome(
        app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coroutines, "CANCEL_WAIT", DEADLINE)

    @app.task
    async def quick(index: int) -> int:
        return index

    worker = app.worker(pool="asyncio", concurrency=2, grace=0.0)
    sending, written = threading.Event(), threading.Event()
    received = loop_acks.Replies.data_received
    held: List[Tuple[loop_acks.Replies, bytes]] = []

    def slow_data(self: loop_acks.Replies, data: bytes) -> None:
        # the first reply's bytes held up for a second, its command run: the grace runs
        # out (a cancel) while they are on their way, and the outcome is written already
        if written.is_set():
            received(self, data)
            return
        held.append((self, data))
        if len(held) == 1:
            sending.set()
            self.loop.call_later(1.0, release)

    def release() -> None:
        for replies, data in held:  # in the order they came, each to its connection
            received(replies, data)
        written.set()

    given_back: List[bool] = []  # per release_all: whether the outcome was written by then
    release_all = worker._leases.release_all

    def watched_release_all() -> None:
        given_back.append(written.is_set())
        release_all()

    monkeypatch.setattr(loop_acks.Replies, "data_received", slow_data)
    monkeypatch.setattr(worker._leases, "release_all", watched_release_all)
    app.broker.client.script_load(source("ack_fetch"))  # (else the threads load it: theirs)
    handles = [quick.delay(index) for index in range(2)]
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert sending.wait(DEADLINE), "no outcome was recorded from the loop"
        worker.stop()  # grace 0: over at once, with the outcome on its way
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive(), "the worker did not end"
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert given_back == [True], "the shutdown gave back leases before the outcome was written"
    statuses = sorted(handle.status() for handle in handles)
    assert statuses[-1] == "succeeded", statuses  # the one recorded from the loop
    keys = queue_keys("loopgrace", "default")
    client = app.broker.client
    # nothing stays leased: a task the round trip leased went back to its queue
    assert client.zcard(keys.leases) == 0
    waiting = sum(client.llen(ready) for ready in keys.ready)
    assert waiting == statuses.count("pending"), (waiting, statuses)
