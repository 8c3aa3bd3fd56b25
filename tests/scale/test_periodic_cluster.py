"""Periodic tasks on a real three-primary Redis Cluster: schedules of queues on three
shards fire once per tick, each schedule's keys in its queue's slot."""
from __future__ import annotations

import threading
from typing import Callable, Dict, List

import pytest

from minitask import current_task
from minitask.broker.keys import queue_keys
from tests.support.scale_kit import DEADLINE, ScaleKit
from tests.support.topologies import Cluster, slot_of
from tests.support.waiting import wait_until

pytestmark = pytest.mark.scale


def test_schedules_on_three_shards_fire_each_tick_once(
        cluster: Cluster, make_kit: Callable[..., ScaleKit]) -> None:
    kit = make_kit(cluster.client(), cluster.url)
    queues = cluster.queues_on_distinct_shards(kit.app_name, 3)
    assert len({cluster.owner_of_slot(slot_of(kit.app_name, q)).port for q in queues}) == 3
    app = kit.app
    runs: Dict[str, List[str]] = {queue: [] for queue in queues}
    lock = threading.Lock()

    @app.task(name="beat")
    def beat(queue: str) -> None:
        with lock:
            runs[queue].append(current_task().id)  # type: ignore[union-attr]

    for queue in queues:
        app.add_schedule(f"every-{queue}", beat, every=0.3, args=(queue,), queue=queue)
        k = queue_keys(kit.app_name, queue)
        assert len({slot_of_key(key) for key in (k.schedules, k.ticks, k.fired, k.ready[0])}) == 1
    # two workers race for every tick
    workers = [app.worker(queues=queues), app.worker(queues=queues)]
    threads = [threading.Thread(target=worker.run) for worker in workers]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: all(len(found) >= 4 for found in runs.values()), timeout=DEADLINE,
                   message="four runs of each schedule")
    finally:
        for queue in queues:
            app.remove_schedule(f"every-{queue}")
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(timeout=DEADLINE)
    assert app.schedules() == []
    for queue, found in runs.items():
        assert len(found) == len(set(found)), f"a tick of {queue} ran twice: {found}"
        assert all(run.startswith(f"every-{queue}@") for run in found)


def slot_of_key(key: str) -> str:
    return key[key.index("{") + 1:key.index("}")]
