"""On a real Redis Cluster (three primaries), an ``app.batch()`` block over three slots
is sent a call at a time; the second call's reply lost (review 29g H2: a stand-in drops
it after the call ran) was told "refused by Redis ... not enqueued", ``sent`` False,
the block's handles failed and that call's queue unlisted, though its task ran. Now:
``sent`` True, the first call enqueued, the second's maybe, the third never sent; the
handles valid, both queues listed.
"""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask import Minitask
from minitask.errors import BrokerError
from tests.support.cutting import batch_call, lose_replies
from tests.support.topologies import Cluster

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

APP = "lost-batch-slots"


def test_a_batch_call_whose_reply_is_lost_on_a_cluster_is_told_sent(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    queues = cluster.queues_on_distinct_shards(APP, 3)  # one on each primary
    app = Minitask(APP, broker=cluster.url)
    task = app.task(name="add")(lambda a: a)
    task.delay(0)  # connected, scripts loaded
    transport = app.broker.queues.transport
    assert transport.connections.pool is None  # the Cluster path: a call at a time
    lose_replies(transport, monkeypatch, batch_call, only=2)  # run by Redis, its reply lost
    handles: List[Any] = []
    try:
        with pytest.raises(BrokerError) as lost:
            with app.batch():
                for queue in queues:
                    handles.append(task.apply_async((1,), queue=queue))
        error = lost.value
        assert error.sent, str(error)
        assert "refused by Redis" not in str(error)
        assert error.task_ids == [handles[0].id, handles[1].id]
        assert error.enqueued_ids == [handles[0].id]
        assert "never reached Redis" in str(error) and handles[2].id in str(error)
        monkeypatch.undo()
        assert set(app.broker.queues.queue_names()) >= set(queues[:2])
        assert [h.status() for h in handles[:2]] == ["queued", "queued"]
    finally:
        app.close()
