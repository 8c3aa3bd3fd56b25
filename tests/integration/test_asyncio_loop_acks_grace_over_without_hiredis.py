"""The grace running out while the asyncio pool's loop reads the reply of its round
trip (worker/loop_acks.py), without hiredis: the cancel lands inside redis-py's
``read_response``, which closed its connection on it, and the reply of the ack and
fetch that had run was lost. The outcome was then recorded a second time by a
recording thread (a false "lost its lease" WARNING), and the task the fetch leased
stayed leased to nobody until its visibility timeout."""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Awaitable, Callable, List

import pytest
from redis._parsers import _AsyncRESP2Parser, _AsyncRESP3Parser

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.stores.scripts import source
from minitask.worker import loop_acks
from minitask.worker.pools import coroutines
from tests.support.parsers import use_parser

pytestmark = [pytest.mark.integration, pytest.mark.app("loopgracepy", on="server")]

DEADLINE = 60.0


def test_the_grace_over_inside_redis_pys_read_keeps_the_reply(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    use_parser(monkeypatch, "redis-py")
    monkeypatch.setattr(coroutines, "CANCEL_WAIT", DEADLINE)

    @app.task
    async def quick(index: int) -> int:
        return index

    worker = app.worker(pool="asyncio", concurrency=1, grace=0.0)
    sending, written = threading.Event(), threading.Event()
    connect = loop_acks.LoopLink._connect
    connecting: List[bool] = []

    async def watched_connect(self: loop_acks.LoopLink) -> Any:
        connecting.append(True)
        try:
            return await connect(self)
        finally:
            connecting.pop()

    def slowed(parse: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def slow_parse(self: Any, *args: Any, **kwargs: Any) -> Any:
            if connecting or sending.is_set():  # (a handshake's reply; a later one's)
                return await parse(self, *args, **kwargs)
            # the first round trip's reply held up inside redis-py's read, its command
            # run: the grace runs out (a cancel) there
            sending.set()
            await asyncio.sleep(1.0)
            reply = await parse(self, *args, **kwargs)
            written.set()
            return reply
        return slow_parse

    monkeypatch.setattr(loop_acks.LoopLink, "_connect", watched_connect)
    for parser in (_AsyncRESP2Parser, _AsyncRESP3Parser):  # (RESP3 where redis-py speaks it)
        monkeypatch.setattr(parser, "read_response", slowed(parser.read_response))
    app.broker.client.script_load(source("ack_fetch"))  # (else the threads load it: theirs)
    handles = [quick.delay(index) for index in range(3)]
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert sending.wait(DEADLINE), "no outcome was recorded from the loop"
        worker.stop()  # grace 0: over at once, inside the read
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive(), "the worker did not end"
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    statuses = [handle.status() for handle in handles]
    assert statuses[0] == "succeeded", statuses  # the one recorded from the loop
    lost = [record.getMessage() for record in caplog.records
            if record.levelno >= logging.WARNING and "lease" in record.getMessage()]
    assert not lost, lost  # recorded once: no second ack finding its lease gone
    keys = queue_keys("loopgracepy", "default")
    client = app.broker.client
    # nothing stays leased: the task the round trip leased went back to its queue
    assert client.zcard(keys.leases) == 0
    waiting = sum(client.llen(ready) for ready in keys.ready)
    assert waiting == len(statuses) - 1, (waiting, statuses)
    assert written.is_set(), "the reply was never read"
