"""A broadcast key of another type (data minitask did not write) never makes
``join()``, ``join(subscribers=...)``, ``status()`` or ``subscribers()`` of a call
raise: each reader ignores it with one log line naming the key, as the send does
(issue 29 section 1; probe29r M2, L2). And a subscriber whose cursor was planted
past a call it has not run is said to be so by ``join()``'s timeout, not "0 call(s)
behind" (probe29r L3). Real redis-server, real (burst) workers.
"""
from __future__ import annotations

import logging
from typing import Iterator, Tuple

import pytest
import redis

from minitask import Minitask, ResultTimeout
from minitask.broker.keys import queue_keys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "news"
KEYS = queue_keys("planted", QUEUE)
STATUSES = {"queued", "running", "retrying", "succeeded", "failed", "unknown"}


@pytest.fixture
def ran(redis_server: RedisServer,
        admin: "redis.Redis[bytes]") -> Iterator[Tuple[Minitask, object]]:
    """An app whose subscriber s1 has run one call (its handle is the second item)."""
    app = Minitask("planted", broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE, name="hear")
    def hear(n: int) -> int:
        return 2 * n

    try:
        app.worker(queues=[QUEUE], subscriber="s1", burst=True).starting()
        handle = hear.delay(21)
        app.worker(queues=[QUEUE], subscriber="s1", burst=True).run()
        assert handle.join(timeout=10) == {"s1": 42}
        yield app, handle
    finally:
        app.close()


@pytest.mark.parametrize("part", ["since", "cursors", "state", "joins", "places", "alive"])
def test_a_broadcast_key_of_another_type_never_makes_a_reader_raise(
        part: str, ran: Tuple[Minitask, object], admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    app, handle = ran
    key = KEYS.broadcast(part)
    admin.delete(key)
    admin.set(key, "x")
    with caplog.at_level(logging.WARNING):
        # the call ran on s1 before the key was planted: its outcome is found
        assert handle.join(timeout=5) == {"s1": 42}  # type: ignore[attr-defined]
        assert handle.join(timeout=5, subscribers=["s1"]) == {"s1": 42}  # type: ignore
        status = handle.status()  # type: ignore[attr-defined]
        assert status == "succeeded" or (part == "joins" and status in STATUSES)
        assert handle.subscribers() in (["s1"], [])  # type: ignore[attr-defined]
        app.subscribers(QUEUE)
    assert admin.type(key) == b"string"  # left as it was: someone's data
    said = [r.getMessage() for r in caplog.records if key in r.getMessage()]
    # said (the keys a reader met: since's, cursors', state's, joins'), never as a
    # bytes repr (probe29r L2)
    if part in ("since", "cursors", "joins"):
        assert said, [r.getMessage() for r in caplog.records]
    assert not [line for line in said if "b'" in line or 'b"' in line], said


def test_a_join_after_a_cursor_planted_past_the_call_says_it_has_not_run_it(
        ran: Tuple[Minitask, object], admin: "redis.Redis[bytes]") -> None:
    app, _ = ran
    later = app.tasks["hear"].delay(1)
    seq = admin.hget(KEYS.broadcast("state"), "seq")
    assert seq is not None
    admin.hset(KEYS.broadcast("cursors"), "s1", seq)  # planted: at the last sequence
    with pytest.raises(ResultTimeout) as caught:
        later.join(timeout=0.5)
    text = str(caught.value)
    assert "0 call(s) behind" not in text, text
    assert "s1 (" in text and "has not run this call" in text, text
