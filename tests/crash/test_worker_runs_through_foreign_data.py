"""A real worker meets data that minitask did not write in its queue's keys, planted
with raw commands while it runs: it goes on running tasks, and never crashes or
backs off as for an outage.

Before, a fractional lease score, a delivery count that is no number or a ready
entry that is not UTF-8 made every fetch fail (or the worker raise while reading
it), with the task it had touched left in no list.
"""
from __future__ import annotations

import msgpack  # type: ignore[import-untyped]
import pytest

from tests.support.crash_kit import DEADLINE, QUEUE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash


def plant(kit: Kit, task_id: str, key: str) -> None:
    """A sound message of tests.apps.basic.record(key), as a producer would write it."""
    body = msgpack.packb({"v": 1, "id": task_id, "task": kit.tasks.record.name, "args": [key],
                          "kwargs": {}, "queue": "default", "priority": 5,
                          "enqueued_at_ms": 1_800_000_000_000, "eta_ms": None, "attempt": 1},
                         use_bin_type=True)
    kit.client.hset(QUEUE.messages, task_id, body)


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_runs_on_through_data_minitask_did_not_write(kit: Kit, pool: str) -> None:
    worker = kit.worker("--pool", pool, "-c", "2")
    first = kit.tasks.record.delay("first")
    assert first.get(timeout=DEADLINE) == "first"

    plant(kit, "fractional-lease", "fractional lease")
    kit.client.zadd(QUEUE.leases, {"fractional-lease": 1.5})
    plant(kit, "fractional-delay", "fractional delay")
    kit.client.zadd(QUEUE.delayed, {"fractional-delay": -2.5, "ghost": float("-inf")})
    plant(kit, "uncounted", "uncounted")
    kit.client.hset(QUEUE.deliveries, "uncounted", "many")
    kit.client.hset(QUEUE.messages, b"\xff\xfe", b"junk")
    kit.client.rpush(QUEUE.ready[4], b"\xff\xfe", "", "uncounted")

    after = [kit.tasks.record.delay(f"after-{i}") for i in range(4)]
    assert [h.get(timeout=DEADLINE) for h in after] == [f"after-{i}" for i in range(4)]
    for key in ("fractional lease", "fractional delay", "uncounted"):
        kit.wait_for_marks("done", key)
    wait_until(lambda: kit.in_flight() == 0, timeout=DEADLINE, message="the queue to drain")
    assert worker.poll() is None, "the worker lives on"
    assert kit.client.hget(QUEUE.messages, b"\xff\xfe") == b"junk"  # left as it is
    logs = "".join(path.read_text(errors="replace") for path in kit.logs.glob("worker-*.log"))
    assert "lost Redis" not in logs and "Traceback" not in logs, logs[-3000:]
