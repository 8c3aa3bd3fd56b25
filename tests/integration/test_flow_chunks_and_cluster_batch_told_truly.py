"""A send that Redis has, or may have, run in part is never said "not enqueued" (review
29g): a flow-controlled delay_many() over 1,000 calls whose later chunk is refused (H1:
the chunks before are named enqueued, their queue listed) or whose reply is lost (the
ids split into enqueued, maybe, unsent); an app.batch() sent a call at a time (the Redis
Cluster path) whose call's reply is lost (H2: never "refused", its queue listed). On a
real redis-server: the refusal a real OOM; the lost reply and the Cluster path stand-ins
(a transport whose reply is dropped after the write ran, a connection set with no pool).
"""
from __future__ import annotations

import asyncio
from typing import Any, List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.cutting import batch_call, call_at_a_time, lose_replies
from tests.support.full_redis import full_after_first_chunk
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def _registered(admin: "redis.Redis[bytes]", app: Minitask) -> set:
    return admin.smembers(app.broker.queues.app_keys.queues)


def _limited_app(redis_server: RedisServer, name: str) -> Any:
    app = Minitask(name, broker=redis_server.url)

    @app.task(name="t", rate_limit="1000/s")
    def t(value: str) -> str:
        return value

    @app.task(name="warm", queue="other")
    def warm() -> None:
        return None

    warm.delay()  # scripts loaded, the connection made; "default" not listed yet
    return app, t


def _check_refused(admin: "redis.Redis[bytes]", app: Minitask, error: BrokerError,
                   reason: str = "out of memory") -> None:
    messages = admin.hkeys(QueueKeys(app.name, "default").messages)
    assert len(messages) == 1000
    assert error.reason == reason and "OOM" in str(error)
    assert error.sent, str(error)  # never "nothing was enqueued": 1,000 will run
    assert sorted(i.encode() for i in error.task_ids) == sorted(messages)
    assert error.enqueued_ids == error.task_ids
    assert len(error.unsent_ids) == 1500
    assert "the first 1000 of the call's 2500 task(s) were enqueued" in str(error)
    assert b"default" in _registered(admin, app)  # listed: findable by id


def test_a_flow_send_whose_later_chunk_is_refused_names_those_enqueued(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    app, t = _limited_app(redis_server, "flowcut")
    try:
        with full_after_first_chunk(admin), pytest.raises(BrokerError) as refused:
            t.delay_many([("p" * 2000,) for _ in range(2500)])
        _check_refused(admin, app, refused.value)
    finally:
        admin.config_set("maxmemory", 0)
        app.close()


def test_an_awaited_flow_send_whose_later_chunk_is_refused_names_those_enqueued(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    app, t = _limited_app(redis_server, "aflowcut")

    async def send() -> BrokerError:
        await t.adelay_many([("warm",)])  # the async connection made, scripts loaded
        admin.hdel(QueueKeys(app.name, "default").messages,
                   *admin.hkeys(QueueKeys(app.name, "default").messages))
        admin.delete(app.broker.queues.app_keys.queues)
        app.async_broker()._known_queues.clear()
        try:
            with full_after_first_chunk(admin):
                await t.adelay_many([("p" * 2000,) for _ in range(2500)])
        except BrokerError as exc:
            return exc
        finally:
            await app.aclose()
        raise AssertionError("the send was not refused")

    try:
        error = asyncio.run(send())
        admin.config_set("maxmemory", 0)
        _check_refused(admin, app, error)  # (asyncio: classified as the blocking path)
    finally:
        admin.config_set("maxmemory", 0)
        app.close()


def test_a_flow_send_whose_later_chunk_reply_is_lost_splits_its_ids(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, t = _limited_app(redis_server, "flowlost")
    transport = app.broker.queues.transport
    # the second chunk written whole, then the reply lost
    lose_replies(transport, monkeypatch,
                 lambda calls, what: bool(calls) and calls[0][0] == "enqueue_flow", only=2)
    try:
        with pytest.raises(BrokerError) as lost:
            t.delay_many([(str(i),) for i in range(2500)])
        ids = [h for h in lost.value.task_ids]
        assert lost.value.sent
        assert len(lost.value.enqueued_ids) == 1000
        assert len(ids) == 2000 and ids[:1000] == lost.value.enqueued_ids
        assert len(lost.value.unsent_ids) == 500
        assert "may have been made" in str(lost.value)
        messages = set(admin.hkeys(QueueKeys(app.name, "default").messages))
        assert messages == {i.encode() for i in ids}  # those told maybe: in Redis here
        assert not messages & {i.encode() for i in lost.value.unsent_ids}
    finally:
        app.close()


def test_a_batch_call_at_a_time_whose_reply_is_lost_is_never_said_refused(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = Minitask("clbatch", broker=redis_server.url)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    t.delay("warm")
    transport = app.broker.queues.transport
    call_at_a_time(transport, monkeypatch)
    # the second call written whole, its reply lost
    lose_replies(transport, monkeypatch, batch_call, only=2)
    handles: List[Any] = []
    try:
        with pytest.raises(BrokerError) as lost:
            with app.batch():
                handles.append(t.apply_async(("a",), queue="q1"))
                handles.append(t.apply_async(("b",), queue="q2"))
                handles.append(t.apply_async(("c",), queue="q3"))
        error = lost.value
        assert error.sent, str(error)  # never "not enqueued": the handles stand
        assert "refused by Redis" not in str(error)
        assert error.task_ids == [handles[0].id, handles[1].id]
        assert error.enqueued_ids == [handles[0].id]  # Redis answered for the first
        assert "never reached Redis" in str(error) and handles[2].id in str(error)
        assert {b"q1", b"q2"} <= _registered(admin, app)  # findable by id
        monkeypatch.undo()
        assert [h.status() for h in handles[:2]] == ["queued", "queued"]
    finally:
        app.close()
