"""A malformed message in front of good ones never holds the queue, on either pool."""
from __future__ import annotations

import signal
import time

import msgpack  # type: ignore[import-untyped]
import pytest

from tests.support.crash_kit import DEADLINE, Kit
from tests.support.processes import exit_code, send

pytestmark = pytest.mark.crash

GOOD = 100


@pytest.mark.parametrize("field,value", [("eta_ms", "soon"),
                                         ("enqueued_at_ms", int(time.time() * 1000) * 1000)],
                         ids=["eta_ms-soon", "enqueued_at_ms-a_thousand_times_now"])
@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_malformed_message_ahead_of_a_hundred_good_ones_is_dead_lettered_and_they_run(
        kit: Kit, pool: str, field: str, value: object) -> None:
    now_ms = int(time.time() * 1000)
    fields = {"v": 1, "id": "planted-1", "task": "tests.apps.basic.record", "args": ["bad"],
              "kwargs": {}, "queue": "default", "priority": 5, "enqueued_at_ms": now_ms,
              "eta_ms": None, "attempt": 1, field: value}
    planted = msgpack.packb(fields, use_bin_type=True)
    assert kit.tasks.app.broker.queues.enqueue("default", [("planted-1", planted, 5, 0)],
                                               now_ms) == 1
    handles = [kit.tasks.record.delay(f"good-{index}") for index in range(GOOD)]

    started = time.monotonic()
    worker = kit.worker("--pool", pool, "-c", "1")
    assert [h.get(timeout=DEADLINE) for h in handles] == [f"good-{i}" for i in range(GOOD)]
    assert kit.tasks.app.handle("planted-1").status() == "failed"
    [dead] = kit.tasks.app.dead_letters()
    assert dead.task_id == "planted-1" and dead.exc_type == "DecodeError"
    assert f"field {field!r}" in dead.message
    assert kit.marks("done", "bad") == []  # it never ran
    assert worker.poll() is None, "the worker is still up"
    print(f"\n{pool}: {GOOD} good tasks behind a malformed one ran in "
          f"{time.monotonic() - started:.2f} s, worker start included")
    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0
