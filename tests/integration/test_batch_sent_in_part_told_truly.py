"""An ``app.batch()`` block that Redis enqueued in part says so (review 29h H2, M1).

Refused in part (one queue's key of another type): the error said ``sent`` False with
no ids, though a call was enqueued, and every handle raised BatchNotSent; a retry
trusting "sent False: nothing was enqueued" doubled the enqueued calls. Now ``sent``
True, ``enqueued_ids`` the calls Redis answered for, ``unsent_ids`` the refused and the
never sent; the enqueued calls' handles answer, the others raise BatchNotSent. Cut by a
lost reply on the call-at-a-time path (Redis Cluster's): the calls after the cut never
reached Redis, now named in ``unsent_ids`` and their handles raising, and the message
counts the whole block. On a real redis-server; the Cluster path and the lost reply
stand-ins (a connection set with no pool; a reply dropped after its call ran).
"""
from __future__ import annotations

from typing import Any, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BatchNotSent, BrokerError
from tests.support.cutting import batch_call, call_at_a_time, lose_replies
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def _app(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.url)

    @app.task(name="t")
    def t(value: str) -> str:
        return value

    t.delay("warm")  # connected, scripts loaded
    return app, t


def _send(app: Minitask, t: Any, queues: List[str]) -> Tuple[BrokerError, List[Any]]:
    handles: List[Any] = []
    with pytest.raises(BrokerError) as failed:
        with app.batch():
            for queue in queues:
                handles.append(t.apply_async((queue,), queue=queue))
    return failed.value, handles


@pytest.mark.parametrize("one_write", [True, False], ids=["one-write", "call-at-a-time"])
def test_a_batch_refused_in_part_is_told_sent_with_its_ids_split(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch, one_write: bool) -> None:
    app, t = _app(redis_server, f"part{int(one_write)}")
    if not one_write:
        call_at_a_time(app.broker.queues.transport, monkeypatch)
    admin.set(QueueKeys(app.name, "qb").messages, "planted")
    try:
        error, handles = _send(app, t, ["qa", "qb", "qc"])
        ids = [h.id for h in handles]
        # one write: the refusal in place, qc enqueued; a call at a time: qc never sent
        enqueued = [ids[0], ids[2]] if one_write else [ids[0]]
        assert error.sent, str(error)  # never "nothing was enqueued"
        assert error.reason == "wrong type" or "WRONGTYPE" in str(error)
        assert error.enqueued_ids == enqueued and error.task_ids == enqueued
        assert error.unsent_ids == [i for i in ids if i not in enqueued]
        assert "refused by Redis" in str(error)
        listed = admin.smembers(app.broker.queues.app_keys.queues)
        assert b"qa" in listed and b"qb" not in listed
        assert (b"qc" in listed) == one_write  # a queue of no call written: unlisted
        monkeypatch.undo()
        for handle in handles:
            if handle.id in enqueued:
                assert handle.status() == "queued"
                assert admin.hexists(QueueKeys(app.name, handle._queue).messages, handle.id)
            else:
                with pytest.raises(BatchNotSent, match="unsent_ids"):
                    handle.status()
    finally:
        app.close()


def test_a_nested_block_refused_in_part_splits_its_handles_too(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    app, t = _app(redis_server, "partnest")
    admin.set(QueueKeys(app.name, "qb").messages, "planted")
    try:
        with pytest.raises(BrokerError) as failed:
            with app.batch():
                first = t.apply_async(("a",), queue="qa")
                with app.batch():
                    second = t.apply_async(("b",), queue="qb")
        assert failed.value.sent and failed.value.unsent_ids == [second.id]
        assert first.status() == "queued"
        with pytest.raises(BatchNotSent):
            second.status()
    finally:
        app.close()


def test_a_batch_refused_whole_is_told_not_sent(
        admin: "redis.Redis[bytes]", redis_server: RedisServer) -> None:
    app, t = _app(redis_server, "partnone")
    admin.set(QueueKeys(app.name, "qb").messages, "planted")
    try:
        error, handles = _send(app, t, ["qb"])
        assert not error.sent and error.task_ids == [] and error.enqueued_ids == []
        assert error.unsent_ids == [handles[0].id]
        with pytest.raises(BatchNotSent):
            handles[0].status()
    finally:
        app.close()


def test_a_batch_cut_by_a_lost_reply_names_the_calls_never_sent(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    app, t = _app(redis_server, "cutsent")
    call_at_a_time(app.broker.queues.transport, monkeypatch)
    transport = app.broker.queues.transport
    # the second call written whole, its reply lost
    lose_replies(transport, monkeypatch, batch_call, only=2)
    try:
        error, handles = _send(app, t, ["q1", "q2", "q3"])
        assert error.sent
        assert error.task_ids == [handles[0].id, handles[1].id]
        assert error.enqueued_ids == [handles[0].id]
        assert error.unsent_ids == [handles[2].id]
        assert "block of 3 task(s)" in str(error)
        monkeypatch.undo()
        assert [h.status() for h in handles[:2]] == ["queued", "queued"]
        with pytest.raises(BatchNotSent):  # never reached Redis: never "unknown" for ever
            handles[2].status()
    finally:
        app.close()
