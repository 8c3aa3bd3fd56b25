"""Flow control on a real three-primary Redis Cluster (guide/flow-control): limits, parking,
debounce and expiry on queues of three shards, every key under its queue's tag."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, List, Tuple

import pytest

from minitask import TaskFailed
from minitask.admin import purge_ready, queue_counts
from minitask.broker.keys import QueueKeys
from minitask.wire.message import Outcome
from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.topologies import Cluster, slot_of
from tests.support.waiting import wait_until

pytestmark = pytest.mark.scale


def test_limits_debounce_and_expiry_hold_on_queues_of_three_shards(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url)
    app = kit.app
    queues = cluster.queues_on_distinct_shards(kit.app_name, 3)
    assert len({cluster.owner_of_slot(slot_of(kit.app_name, q)).port for q in queues}) == 3
    starts: List[Tuple[str, str, float]] = []
    lock = threading.Lock()

    @app.task(name="limited", rate_limit="10/s", max_running=1)
    def limited(queue: str) -> str:
        with lock:
            starts.append(("limited", queue, time.time()))
        return queue

    @app.task(name="plain")
    def plain(queue: str) -> str:
        return queue

    @app.task(name="fast", rate_limit="600/s")  # paced alone: a pace key, no log
    def fast(queue: str) -> str:
        return queue

    handles: List[Any] = []
    for queue in queues:
        handles += [limited.apply_async((queue,), queue=queue, limit_key=queue)
                    for _ in range(5)]
        handles += [plain.apply_async((queue,), queue=queue) for _ in range(5)]
        handles += [fast.apply_async((queue,), queue=queue, limit_key=queue)
                    for _ in range(5)]
    debounced = [plain.apply_async((f"v{n}",), queue=queues[0], task_id="d", debounce=0.3)
                 for n in range(3)][-1]
    expired = plain.apply_async(("late",), queue=queues[1], expires=0.2)
    time.sleep(0.3)  # expired before any worker runs
    worker = app.worker(queues=queues, concurrency=2, pool="thread")
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        assert [h.get(timeout=DEADLINE) for h in handles] == [
            q for q in queues for _ in range(15)]
        assert debounced.get(timeout=DEADLINE) == "v2"
        with pytest.raises(TaskFailed) as failed:
            expired.get(timeout=DEADLINE)
        assert failed.value.exc_type == "Expired"
    finally:
        worker.stop()
        runner.join(timeout=DEADLINE)
    for queue in queues:
        times = sorted(at for _, q, at in starts if q == queue)
        assert len(times) == 5
        # paced at 10/s: four paces of 100 ms (less half a pace of slack at most)
        assert times[-1] - times[0] >= 0.3
        k = QueueKeys(kit.app_name, queue)
        wait_until(lambda: app.broker.client.hlen(k.flow) == 0, timeout=DEADLINE,
                   message=f"no flow spec left in {queue}")


def test_parked_counts_purge_and_a_requeued_dead_letter_work_on_three_shards(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url)
    app = kit.app
    queues = cluster.queues_on_distinct_shards(kit.app_name, 3)

    @app.task(name="slots", max_running=1)
    def slots(n: int) -> int:
        return n

    for queue in queues:
        for n in range(5):
            slots.apply_async((n,), queue=queue, limit_key="k")
        now_ms = app.clock.now_ms()
        first = app.broker.queues.fetch(queue, now_ms=now_ms, lease_ms=60_000, count=5,
                                        max_deliveries=5)
        assert len(first.deliveries) == 1  # one slot: the other four are parked
        counts = queue_counts(app, queue)
        assert counts["parked"] == 4 and counts["ready"] == 4
        died = Outcome("failed", now_ms, exc_type="Boom", reason="failed")
        dead_id = first.deliveries[0].task_id
        assert app.broker.results.bury(queue, dead_id, outcome=died, result_ttl_ms=60_000)
        assert purge_ready(app, queue) == 4
        assert app.requeue_dead(dead_id)
        k = QueueKeys(kit.app_name, queue)
        assert app.broker.client.hget(k.flow, dead_id) == b"5:slots:k\n0\n0\n1\n0\n0"
        again = app.broker.queues.fetch(queue, now_ms=app.clock.now_ms(), lease_ms=60_000,
                                        count=5, max_deliveries=5)
        assert [d.task_id for d in again.deliveries] == [dead_id]
        assert "parked" not in queue_counts(app, queue)
