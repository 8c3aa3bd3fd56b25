"""Broadcast tasks on a real three-primary Redis Cluster (guide/broadcast): every script of
a queue's broadcasts (send, pull into a lane, the lane's fetch and ack) stays in
the slot of the queue's hash tag, on queues of three shards."""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List

import pytest

from minitask.broker.keys import QueueKeys, lane
from minitask.worker import Worker
from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.topologies import Cluster, slot_of

pytestmark = pytest.mark.scale


def test_broadcasts_run_on_every_subscriber_for_queues_of_three_shards(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url)
    app = kit.app
    queues = cluster.queues_on_distinct_shards(kit.app_name, 3)
    assert len({cluster.owner_of_slot(slot_of(kit.app_name, q)).port for q in queues}) == 3
    tasks: Dict[str, Any] = {}
    for queue in queues:
        def echo(n: int, queue: str = queue) -> str:
            return f"{queue}:{n}"
        tasks[queue] = app.task(name=f"echo-{queue}", broadcast=True, queue=queue)(echo)

    workers: List[Worker] = []
    threads: List[threading.Thread] = []
    for name in ("a", "b"):
        worker = app.worker(queues=queues, subscriber=name, pool="thread")
        worker.starting()  # subscribed before anything is sent
        workers.append(worker)
    handles = [(queue, n, tasks[queue].delay(n)) for n in range(3) for queue in queues]
    for worker in workers:
        threads.append(threading.Thread(target=worker.run))
        threads[-1].start()
    try:
        for queue, n, handle in handles:
            assert handle.join(timeout=DEADLINE) == {"a": f"{queue}:{n}", "b": f"{queue}:{n}"}
        # idle now: a send wakes both subscribers' waits on the queue's shard
        late = tasks[queues[2]].delay(9)
        assert late.join(timeout=DEADLINE) == {"a": f"{queues[2]}:9", "b": f"{queues[2]}:9"}
        assert sorted(s.name for s in app.subscribers(queues[0])) == ["a", "b"]
        assert app.unsubscribe(queues[0], "b")
    finally:
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(timeout=DEADLINE)
    client = app.broker.client
    for queue in queues:
        assert app.broker.broadcasts.log_size(queue) == 0
        k, own = QueueKeys(kit.app_name, queue), QueueKeys(kit.app_name, lane(queue, "a"))
        keys = [k.broadcast("cursors"), k.broadcast("names"), own.messages,
                own.result(handles[0][2].id)]
        assert {int(client.cluster_keyslot(key)) for key in keys} == {
            slot_of(kit.app_name, queue)}
