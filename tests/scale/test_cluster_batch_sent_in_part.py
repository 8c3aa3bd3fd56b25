"""On a real Redis Cluster (three primaries), an ``app.batch()`` block over three
slots, sent a call at a time, that Redis enqueued in part says so (review 29h H2, M1).

Refused by one node at ``maxmemory``: the error said ``sent`` False with no ids while
the call before was enqueued, and every handle raised BatchNotSent. The second call's
reply lost (a stand-in drops it after the call ran): the third call, never sent, was
not in ``unsent_ids`` and its handle said ``unknown`` for ever; the message counted 2
tasks of 3. Now the ids split (enqueued, maybe, unsent) and only the handles of calls
not enqueued raise.
"""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask import Minitask
from minitask.errors import BatchNotSent, BrokerError
from tests.support.cutting import batch_call, lose_replies
from tests.support.topologies import Cluster, slot_of

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]


def _send(app: Minitask, task: Any, queues: List[str]) -> Any:
    handles: List[Any] = []
    with pytest.raises(BrokerError) as failed:
        with app.batch():
            for queue in queues:
                handles.append(task.apply_async((1,), queue=queue))
    return failed.value, handles


def test_a_batch_refused_by_one_node_at_maxmemory_is_told_sent_in_part(
        cluster: Cluster) -> None:
    name = "part-oom-slots"
    queues = cluster.queues_on_distinct_shards(name, 3)  # one on each primary
    app = Minitask(name, broker=cluster.url)
    task = app.task(name="add")(lambda a: a)
    task.delay(0)  # connected, scripts loaded
    assert app.broker.queues.transport.connections.pool is None  # a call at a time
    full = cluster.owner_of_slot(slot_of(name, queues[1]))
    try:
        with full.client() as client:
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", 1)  # below its use: every write refused
        error, handles = _send(app, task, queues)
        with full.client() as client:
            client.config_set("maxmemory", 0)
        assert error.sent, str(error)  # the first call was enqueued
        assert "OOM" in str(error) and "refused by Redis" in str(error)
        assert error.enqueued_ids == error.task_ids == [handles[0].id]
        assert error.unsent_ids == [handles[1].id, handles[2].id]
        assert handles[0].status() == "queued"
        for handle in handles[1:]:
            with pytest.raises(BatchNotSent):
                handle.status()
    finally:
        with full.client() as client:
            client.config_set("maxmemory", 0)
        app.close()


def test_a_batch_cut_by_a_lost_reply_on_a_cluster_names_the_calls_never_sent(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "cut-unsent-slots"
    queues = cluster.queues_on_distinct_shards(name, 3)  # one on each primary
    app = Minitask(name, broker=cluster.url)
    task = app.task(name="add")(lambda a: a)
    task.delay(0)
    transport = app.broker.queues.transport
    assert transport.connections.pool is None
    lose_replies(transport, monkeypatch, batch_call, only=2)  # run by Redis, its reply lost
    try:
        error, handles = _send(app, task, queues)
        assert error.sent
        assert error.task_ids == [handles[0].id, handles[1].id]
        assert error.enqueued_ids == [handles[0].id]
        assert error.unsent_ids == [handles[2].id]
        assert "block of 3 task(s)" in str(error)
        monkeypatch.undo()
        assert [h.status() for h in handles[:2]] == ["queued", "queued"]
        with pytest.raises(BatchNotSent):
            handles[2].status()
    finally:
        app.close()
