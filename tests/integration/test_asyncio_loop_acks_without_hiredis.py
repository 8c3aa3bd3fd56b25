"""The asyncio pool's outcomes recorded from its loop (worker/loop_acks.py) with either
parser: hiredis is optional (the ``hiredis`` extra), and without it redis-py's
``read_response`` reads the loop's replies. The suite installs hiredis, so these
tests hide it to run that path at all.

A script Redis no longer has (a SCRIPT FLUSH, a restart) sends the loop's outcome to
the recording threads, which load it, and the loop tries again with the next: it
does not rest as after an outage. redis-py cuts the "NOSCRIPT" prefix off its
``NoScriptError``, and without hiredis the loop rested a second after each."""
from __future__ import annotations

import threading
from typing import Any, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from minitask.worker import loop_acks
from tests.support.parsers import PARSERS, pack, use_parser

pytestmark = [pytest.mark.integration, pytest.mark.app("nohiredis", on="server")]

DEADLINE = 60.0
TASKS = 40


@pytest.mark.parametrize("parser", PARSERS)
def test_plain_successes_recorded_from_the_loop_with_either_parser(
        parser: str, app: Minitask, monkeypatch: pytest.MonkeyPatch) -> None:
    use_parser(monkeypatch, parser)

    @app.task
    async def double(index: int) -> int:
        return 2 * index

    exchange, record = loop_acks.LoopLink.exchange, loop_acks.LoopAcks.record
    readers: List[bool] = []  # per round trip: whether hiredis parsed its reply
    failed: List[BaseException] = []
    rests: List[float] = []  # per round trip that failed: the rest it left after it

    async def watched_exchange(self: loop_acks.LoopLink, packed: bytes) -> Any:
        if not readers:  # the first: Redis forgets every script (SCRIPT FLUSH)
            await exchange(self, pack(b"SCRIPT", b"FLUSH"))
        readers.append(self._reader_class is not None)
        try:
            return await exchange(self, packed)
        except Exception as exc:
            failed.append(exc)
            raise

    async def watched_record(self: loop_acks.LoopAcks) -> loop_acks.Answer:
        before = len(failed)
        answer = await record(self)
        if len(failed) > before:
            rests.append(self._resting_until)
        return answer

    monkeypatch.setattr(loop_acks.LoopLink, "exchange", watched_exchange)
    monkeypatch.setattr(loop_acks.LoopAcks, "record", watched_record)
    handles = [double.delay(index) for index in range(TASKS)]
    worker = app.worker(pool="asyncio", concurrency=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        results = [handle.get(timeout=DEADLINE) for handle in handles]
    finally:
        worker.stop()
        thread.join(timeout=DEADLINE)
    assert not thread.is_alive(), "the worker did not end"
    assert results == [2 * index for index in range(TASKS)]
    assert readers, "no outcome was recorded from the loop"
    assert set(readers) == {parser == "hiredis"}, readers
    assert failed and isinstance(failed[0], redis.ResponseError), failed
    assert "No matching script" in str(failed[0]), failed[0]
    assert rests and rests[0] == 0.0, "the loop rested after a script Redis did not have"
    keys = queue_keys("nohiredis", "default")
    assert app.broker.client.zcard(keys.leases) == 0
