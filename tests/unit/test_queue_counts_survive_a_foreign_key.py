"""One key of another type in one queue (a ready list, the cancelled set) no longer takes
down the counts of every queue: ``minitask status``, the dashboard's home and /metrics
read the others, and that key counts as empty, said once."""
from __future__ import annotations

import redis

from minitask import Minitask
from minitask.admin import all_queue_counts
from minitask.broker.keys import queue_keys


def test_the_other_queues_are_counted_and_the_bad_key_as_empty(
        app: Minitask, fake_redis: "redis.Redis[bytes]") -> None:
    @app.task(queue="good")
    def ok() -> None:
        pass

    @app.task(queue="bad")
    def meh() -> None:
        pass

    ok.delay()
    ok.apply_async(priority=9)
    meh.delay()
    bad = queue_keys(app.name, "bad")
    fake_redis.set(bad.ready[9 - 3], b"x")      # a ready list of another type
    fake_redis.set(bad.cancelled, b"x")         # and the cancelled set
    counts = all_queue_counts(app, ["good", "bad"])
    assert counts["good"]["ready"] == 2 and counts["good"]["ready_by_priority"] == {
        "9": 1, "5": 1}
    assert counts["bad"]["ready"] == 1  # its default-priority task, the planted list as empty
