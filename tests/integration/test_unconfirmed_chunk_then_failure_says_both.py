"""A send that stops at a later write, after an earlier one was written but not confirmed
by replicas, says both (last session's note, review29d F3): the later write's failure
(refused, or its reply lost: ``enqueued_ids``, ``task_ids``, ``unsent_ids`` as before)
and that the writes ahead were unconfirmed (``unconfirmed_ids``, and the message). Before,
the DurabilityError kept for the earlier write was dropped: nothing said those tasks may
not survive a failover.

On a real redis-server with no replica, so that every write is unconfirmed
(``durability="replicated"``); the refusal a real OOM (or a key of another type), the
lost reply a stand-in (a transport dropping the reply of a write that ran).
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterator, List, Tuple

import pytest
import redis

from minitask import BrokerError, DurabilityError, Minitask
from minitask.broker.durability import keep_unconfirmed
from minitask.broker.keys import QueueKeys
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

CALLS = 2500  # chunks of 1,000: 1,000 written, 1,500 never sent


@pytest.fixture
def server(start_redis: Callable[..., RedisServer]) -> RedisServer:
    return start_redis()  # this test's own: made full, and no replica confirms a write


@pytest.fixture
def admin(server: RedisServer) -> Iterator["redis.Redis[bytes]"]:
    client = server.client()
    client.config_set("maxmemory-policy", "noeviction")
    try:
        yield client
    finally:
        client.config_set("maxmemory", 0)
        client.close()


def durable_app(server: RedisServer, name: str) -> Tuple[Minitask, Any, Any]:
    app = Minitask(name, broker=server.url, durability="replicated", durability_timeout=0.1)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    @app.task(name="lim", rate_limit="100000/s")
    def lim(value: str) -> str:
        return value
    return app, t, lim


def full_after(admin: "redis.Redis[bytes]", room: int) -> None:
    """Redis refuses writes once ``room`` more bytes are used: a first chunk of 2 MB fits."""
    admin.config_set("maxmemory", admin.info("memory")["used_memory"] + room)


def check_unconfirmed_ahead(error: BrokerError, admin: "redis.Redis[bytes]",
                            app: Minitask) -> None:
    """The first chunk's 1,000 tasks: enqueued (in Redis), and said unconfirmed."""
    said = str(error)
    assert not isinstance(error, DurabilityError), said  # the later failure is the error
    assert error.sent, said
    assert len(error.enqueued_ids) == 1000
    assert error.unconfirmed_ids == error.enqueued_ids, said
    messages = set(admin.hkeys(QueueKeys(app.name, "default").messages))
    assert {i.encode() for i in error.unconfirmed_ids} <= messages  # written, yet unconfirmed
    assert "not confirmed" in said and "0 of 1 replica" in said, said
    assert "unconfirmed_ids" in said and "failover" in said, said
    first, last = error.unconfirmed_ids[0], error.unconfirmed_ids[-1]
    assert repr(first) in said and repr(last) in said, said


@pytest.mark.parametrize("task", ["t", "lim"])
def test_a_later_chunk_refused_after_an_unconfirmed_one_says_both(
        server: RedisServer, admin: "redis.Redis[bytes]", task: str) -> None:
    app, *_ = durable_app(server, f"unconf-{task}")
    try:
        with pytest.raises(DurabilityError):
            app.tasks[task].delay("warm")  # scripts loaded (unconfirmed: no replica)
        full_after(admin, 3_000_000)
        with pytest.raises(BrokerError) as refused:
            app.tasks[task].delay_many([("p" * 2000,) for _ in range(CALLS)])
        admin.config_set("maxmemory", 0)
        error = refused.value
        assert error.reason == "out of memory", str(error)
        assert "partly enqueued" in str(error)  # the refusal's own words, kept
        assert error.task_ids == error.enqueued_ids and len(error.unsent_ids) == 1500
        check_unconfirmed_ahead(error, admin, app)
    finally:
        app.close()


def test_a_later_chunk_whose_reply_is_lost_after_an_unconfirmed_one_says_both(
        server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, t, _ = durable_app(server, "unconf-lost")
    transport = app.broker.queues.transport
    real, chunks = transport.run_calls, [0]

    def run_calls(calls: Any, what: str, *args: Any, **kwargs: Any) -> Any:
        if calls and calls[0][0] == "enqueue" and len(calls[0][3]) > 3000:
            chunks[0] += 1
            if chunks[0] == 2:  # written whole, then its reply lost
                with keep_unconfirmed() as its_own:  # (its WAIT's reply is lost too)
                    real(calls, what, *args, **kwargs)
                    its_own.clear()
                raise BrokerError(f"lost the reply to {what}: Connection reset", sent=True)
        return real(calls, what, *args, **kwargs)

    monkeypatch.setattr(transport, "run_calls", run_calls)
    try:
        with pytest.raises(BrokerError) as lost:
            t.delay_many([(str(n),) for n in range(CALLS)])
        error = lost.value
        assert "may have been made" in str(error)  # the lost reply's own words, kept
        assert len(error.task_ids) == 2000 and error.task_ids[:1000] == error.enqueued_ids
        assert len(error.unsent_ids) == 500
        check_unconfirmed_ahead(error, admin, app)
    finally:
        app.close()


def test_an_awaited_later_chunk_refused_after_an_unconfirmed_one_says_both(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, t, _ = durable_app(server, "unconf-async")

    async def send() -> BrokerError:
        try:
            with pytest.raises(DurabilityError):
                await t.adelay_many([("warm",)])  # the async connection made, scripts loaded
            full_after(admin, 3_000_000)
            with pytest.raises(BrokerError) as refused:
                await t.adelay_many([("p" * 2000,) for _ in range(CALLS)])
            return refused.value
        finally:
            await app.aclose()

    try:
        error = asyncio.run(send())
        admin.config_set("maxmemory", 0)
        assert error.reason == "out of memory", str(error)
        assert "partly enqueued" in str(error)
        check_unconfirmed_ahead(error, admin, app)
    finally:
        app.close()


def test_a_batch_refused_in_part_whose_write_was_unconfirmed_says_both(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """``app.batch()`` (enqueue_queues, one write): one queue's call refused (a key of
    another type, planted), the others written, the write's WAIT short."""
    app, t, _ = durable_app(server, "unconf-batch")
    admin.set(QueueKeys(app.name, "q2").messages, "planted")
    handles: List[Any] = []
    try:
        with pytest.raises(BrokerError) as refused:
            with app.batch():
                handles.append(t.apply_async(("a",), queue="q1"))
                handles.append(t.apply_async(("b",), queue="q2"))
                handles.append(t.apply_async(("c",), queue="q3"))
        error = refused.value
        said = str(error)
        assert not isinstance(error, DurabilityError), said
        assert "refused by Redis" in said and "partly enqueued" in said  # its own words
        assert error.reason == refused.value.reason
        assert "not confirmed" in said and "0 of 1 replica" in said, said
        assert "unconfirmed_ids" in said and "failover" in said, said
        assert set(error.unconfirmed_ids) == {handles[0].id, handles[2].id}, said  # (not q2's)
        assert admin.hexists(QueueKeys(app.name, "q1").messages, handles[0].id)
        assert admin.hexists(QueueKeys(app.name, "q3").messages, handles[2].id)
    finally:
        app.close()
