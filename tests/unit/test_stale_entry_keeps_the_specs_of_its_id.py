"""A stale ready entry of an id that is held delayed (a task cancelled while queued,
then sent again under the same task id with a delay) is dropped without the flow spec
of that id, which is the delayed task's own: the task keeps its rate limit (probe 16:
the fetch deleted the specs, and ten such calls of a 5/s task started within a
second)."""
from __future__ import annotations

from typing import Callable

import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys


def test_a_stale_entry_of_a_delayed_id_leaves_its_flow_spec(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    app = make_app("stale")

    @app.task(rate_limit="5/s", name="limited")
    def limited(n: int) -> int:
        return n

    ids = [f"X{n}" for n in range(3)]
    for task_id in ids:
        assert limited.apply_async((0,), task_id=task_id).cancel()
    for task_id in ids:  # the same ids again, due in an hour: their ready entries are stale
        limited.apply_async((1,), task_id=task_id, delay=3600)
    flow = queue_keys(app.name, "default").flow
    assert redis_client.hlen(flow) == len(ids)
    worker = app.worker()
    worker.run_once()  # meets the stale entries, runs nothing
    assert sorted(redis_client.hkeys(flow)) == [task_id.encode() for task_id in ids]
    assert [app.handle(task_id).status() for task_id in ids] == ["scheduled"] * len(ids)
