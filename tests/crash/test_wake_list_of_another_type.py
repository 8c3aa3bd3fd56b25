"""A queue whose wake list holds data minitask did not write (and whose fetch Redis
refuses: tests/apps/refusing.py) is set aside
without stopping the worker's waits: a real worker on a real redis-server, idle
between tasks, runs each task of its other queue once, on time, and logs neither
"Redis refused to wait for tasks" nor "Redis is back" (no outage happened).

Before (review 11, F1), every wait still blocked on the set-aside queue's wake list:
Redis refused each BLPOP ("wrong type"), the fetch sent behind it was never read and
its connection was dropped, and ``guarded`` retried only the wait: a delayed task of
the other queue was leased by those unread fetches again and again, never run, its
delivery count climbing towards the poison limit.
"""
from __future__ import annotations

import signal

import pytest

from minitask.broker.keys import QueueKeys
from tests.support.crash_kit import DEADLINE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

A, B = QueueKeys("basic", "a"), QueueKeys("basic", "b")


@pytest.mark.parametrize("queues,delay", [("a,b", 2.0), ("b,a", 2.0)])
def test_a_wake_list_of_another_type_stops_no_wait(kit: Kit, queues: str,
                                                   delay: float) -> None:
    log = kit.logs / "worker-0.log"
    flag = kit.logs / "refuse"
    worker = kit.worker("--pool", "thread", "-c", "1", "-Q", queues, app="tests.apps.refusing",
                        TEST_REFUSED_QUEUE="b", TEST_REFUSED_WHILE=str(flag))
    record = kit.tasks.record
    assert record.apply_async(("warm",), queue="a").get(timeout=DEADLINE) == "warm"
    started = len(log.read_text(errors="replace"))

    flag.touch()  # Redis refuses b's fetches too (tests/apps/refusing.py)
    kit.client.set(B.wake, b"someone's string")
    # (a fetch made before, in flight behind an idle wait, is not refused)
    wait_until(lambda: "'b' set aside" in log.read_text(errors="replace")[started:],
               timeout=DEADLINE, message="the first refusal of 'b'")
    waiting = record.apply_async(("b-task",), queue="b")
    for round_ in range(3):  # the worker goes idle, and waits, between them
        handle = record.apply_async((f"a-{round_}",), queue="a", delay=delay)
        assert handle.get(timeout=DEADLINE) == f"a-{round_}"
        assert len(kit.marks("done", f"a-{round_}")) == 1
    assert kit.client.hvals(A.deliveries) == [], "no task of 'a' handed out twice"
    assert worker.poll() is None
    assert kit.marks("done", "b-task") == []

    text = log.read_text(errors="replace")[started:]
    assert "refused to wait" not in text and "is back" not in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "'b' set aside" in text, text[-3000:]

    flag.unlink()
    kit.client.delete(B.wake)  # fixed: 'b' is served again
    assert waiting.get(timeout=DEADLINE) == "b-task"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    wait_until(lambda: kit.client.zcard(A.leases) == 0, timeout=DEADLINE,
               message="no task of 'a' left leased")
