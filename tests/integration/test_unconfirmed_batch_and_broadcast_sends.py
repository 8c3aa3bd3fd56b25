"""An ``app.batch()`` block and a broadcast send whose writes replicas did not confirm
in time, on a real primary and replica (the replica stopped with SIGSTOP), say truly
what was written (probe29j N3 and a LOW):

* a batch block is written whole (every queue, every chunk): its DurabilityError
  names every task (``task_ids``) and says they were written (sending the block again
  would run them twice); its handles stay valid, never BatchNotSent. A block Redis
  refused in part is the BrokerError it was, its handles BatchNotSent;
* a broadcast send's error points to what answers for a broadcast call (its
  ``BroadcastHandle``), not ``app.handle(id).status()``, which reads ``unknown``.
"""
from __future__ import annotations

import time
from typing import List

import pytest

from minitask import BatchNotSent, BroadcastHandle, BrokerError, DurabilityError, Minitask
from minitask.broker.keys import queue_keys
from tests.support import replicas
from tests.support.replicas import NO_HANG, frozen, pair_per_module  # noqa: F401 (a fixture)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def durable_app(primary: RedisServer, name: str) -> Minitask:
    """replicas.durable_app() and a broadcast task, ``announce``."""
    app = replicas.durable_app(primary, name)

    @app.task(name="announce", queue="news", broadcast=True)
    def announce(n: int) -> int:
        return n
    return app


def test_an_unconfirmed_batch_names_every_task_and_keeps_its_handles(
        pair: List[RedisServer]) -> None:
    primary, replica = pair
    app = durable_app(primary, "batch-unconfirmed")
    add, add2, lim = app.tasks["add"], app.tasks["add2"], app.tasks["lim"]
    try:
        with frozen(replica, NO_HANG * 3):
            with pytest.raises(DurabilityError) as caught:
                with app.batch():
                    handles = [add.delay(n) for n in range(2100)]  # three chunks in "one"
                    handles += [add2.delay(n) for n in range(5)]
                    handles += [lim.delay(n) for n in range(3)]  # flow-controlled
        error = caught.value
        ids = [h.id for h in handles]
        assert sorted(error.task_ids) == sorted(ids), len(error.task_ids)
        assert error.task_id == error.task_ids[0] and error.confirmed == 0
        text = str(error)
        assert "app.batch() block of 2108 task(s)" in text, text
        assert "written" in text and "twice" in text and "0 of 1 replica" in text, text
        with primary.client() as client:
            assert client.hlen(queue_keys(app.name, "one").messages) == 2103
            assert client.hlen(queue_keys(app.name, "two").messages) == 5
        # the handles stand (the tasks were written): no BatchNotSent
        assert {h.status() for h in handles[::100] + handles[-8:]} == {"queued"}
        assert {app.handle(i).status() for i in error.task_ids[::300]} == {"queued"}
    finally:
        app.close()


def test_a_batch_redis_refused_in_part_stays_not_sent(pair: List[RedisServer]) -> None:
    """A refusal (a key of another type) is a real failure, replica confirming or not:
    the refused call is not enqueued (its handle raises), the other stands, told
    enqueued (review 29h H2: no longer "sent False", every handle raising)."""
    primary, replica = pair
    app = durable_app(primary, "batch-refused")
    add, add2 = app.tasks["add"], app.tasks["add2"]
    with primary.client() as client:
        client.set(queue_keys(app.name, "two").messages, "planted")
    try:
        with frozen(replica, NO_HANG * 3):
            with pytest.raises(BrokerError) as caught:
                with app.batch():
                    held = [add.delay(1), add2.delay(2)]
        assert not isinstance(caught.value, DurabilityError), caught.value
        assert "refused" in str(caught.value)
        assert caught.value.sent and caught.value.enqueued_ids == [held[0].id]
        assert held[0].status() == "queued"
        with pytest.raises(BatchNotSent):
            held[1].status()
    finally:
        app.close()


def test_an_unconfirmed_broadcast_points_to_what_answers_for_its_call(
        pair: List[RedisServer]) -> None:
    primary, replica = pair
    app = durable_app(primary, "bcast-unconfirmed")
    announce = app.tasks["announce"]
    app.broker.broadcasts.subscribe("news", "listener", int(time.time() * 1000))
    try:
        with frozen(replica, NO_HANG * 3):
            with pytest.raises(DurabilityError) as caught:
                announce.delay_many([(n,) for n in range(3)])
        error = caught.value
        text = str(error)
        assert len(error.task_ids) == 3 and error.task_id == error.task_ids[0], text
        assert "app.handle(" not in text.replace("app.handle(id) knows no broadcast", ""), text
        pointer = f"minitask.BroadcastHandle(app.broker, 'news', {error.task_id!r}).status()"
        assert pointer in text, text
        # what the error points to answers; what it used to point to does not
        for call_id in error.task_ids:
            assert BroadcastHandle(app.broker, "news", call_id).status() == "queued"
            assert app.handle(call_id).status() == "unknown"
    finally:
        app.close()
