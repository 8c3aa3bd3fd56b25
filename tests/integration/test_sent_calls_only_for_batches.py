"""``BrokerError.sent_calls`` is set where errors.rst defines it, an ``app.batch()``
block's write of several calls cut part way, and nowhere else (review 29l, L): the
transport set it on any write cut after its first call, a ``delay()``'s or a workflow's
start (one script call and the touch and WAIT behind it, durability on), and
``errors.retold`` carried it into their errors. On a real redis-server; the cut made by
a write that hands the socket only the first call's bytes, then fails, as a write cut
by a reset does (``WriteFailed``: that call may have run, the WAIT never reached Redis).
"""
from __future__ import annotations

from typing import Any, Iterator, List

import pytest
import redis

from minitask import Minitask, chain
from minitask.broker import transport
from minitask.broker.writes import WriteFailed
from minitask.errors import BrokerError, DurabilityError
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


class _CutAfterFirstCall:
    """Armed, the next counted write hands the socket its first call whole and fails."""

    def __init__(self) -> None:
        self.armed = False
        self.real = transport.write_counted

    def __call__(self, connection: Any, data: bytes, ends: List[int]) -> None:
        if not self.armed:
            return self.real(connection, data, ends)
        self.armed = False
        if connection._sock is None:
            connection.connect()
        connection._sock.sendall(data[:ends[0]])
        connection.disconnect()
        failed = WriteFailed("Error writing to Redis: reset (cut by the test)")
        failed.whole = 1
        raise failed


@pytest.fixture
def cut(monkeypatch: pytest.MonkeyPatch) -> Iterator[_CutAfterFirstCall]:
    cutter = _CutAfterFirstCall()
    monkeypatch.setattr(transport, "write_counted", cutter)
    yield cutter


def _app(redis_server: RedisServer, name: str, **options: Any) -> Any:
    app = Minitask(name, broker=redis_server.url, **options)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    t.apply_async(("warm",), durability=None)  # connected, scripts loaded
    return app, t


@pytest.mark.parametrize("kind", ["delay", "workflow"])
def test_a_single_call_cut_before_its_wait_has_no_sent_calls(
        redis_server: RedisServer, cut: _CutAfterFirstCall, kind: str) -> None:
    app, t = _app(redis_server, f"one{kind}", durability="replicated",
                  durability_timeout=0.2)
    try:
        if kind == "workflow":
            with pytest.raises(DurabilityError):  # its scripts loaded (no replica)
                chain(t.si("a"), t.si("b")).delay()
        cut.armed = True
        with pytest.raises(BrokerError) as lost:
            if kind == "delay":
                t.delay("x")
            else:
                chain(t.si("a"), t.si("b")).delay()
        assert lost.value.sent and lost.value.task_ids, str(lost.value)
        assert lost.value.sent_calls is None  # (was 1)
    finally:
        app.close()


def test_a_batch_cut_after_its_first_call_keeps_its_sent_calls(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        cut: _CutAfterFirstCall) -> None:
    app, t = _app(redis_server, "twobatch")
    try:
        with app.batch():  # the queues' scripts loaded
            t.apply_async(("w",), queue="qa")
            t.apply_async(("w",), queue="qb")
        cut.armed = True
        with pytest.raises(BrokerError) as lost:
            with app.batch():
                first = t.apply_async(("a",), queue="qa")
                second = t.apply_async(("b",), queue="qb")
        assert lost.value.sent_calls == 1
        assert lost.value.task_ids == [first.id] and lost.value.unsent_ids == [second.id]
    finally:
        app.close()
