"""A wake list of another type at a queue's ``wake`` key, planted under an idle
worker blocked on it, is moved aside by the next enqueue into the queue (to
``wake:foreign``, one WARNING in Redis's log naming the key), which then pushes its
token: the worker is woken at once. Every way a producer sends: one naming its
``task_id`` (enqueue_now.lua), a producer's first call into the queue (enqueue.lua),
and a plain ``delay()`` (no script). The plain write is one MULTI/EXEC: its task
stands when only its wake push is refused (a polling worker may already run it, so
nothing is taken back), and the producer's next call into the queue goes by
enqueue.lua, which moves the list aside. Real worker, real redis-server.

Before (issue 29, L4), no token was pushed to such a key and nothing was said: the
worker took the task only when its blocking wait ended (up to 5 s, 4.6 s measured),
and its fetch, finding the queue empty, deleted the planted key unsaid.
"""
from __future__ import annotations

import signal

import pytest

from tests.support.crash_kit import DEADLINE, QUEUE, Kit, client_tasks
from tests.support.processes import exit_code, send
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

PLANTED = b"someone's string"


@pytest.mark.parametrize("how", ["plain", "named", "first"])
def test_an_enqueue_moves_a_foreign_wake_list_aside_and_wakes_the_worker(
        kit: Kit, how: str) -> None:
    worker = kit.worker("--pool", "thread", "-c", "1")
    log = kit.logs / "worker-0.log"
    assert kit.tasks.record.delay("warm").get(timeout=DEADLINE) == "warm"
    wait_until(lambda: kit.blocked_in("blpop") >= 2, timeout=DEADLINE,
               message="the idle worker blocked on its wake list (and its orders)")

    kit.client.delete(QUEUE.wake)
    kit.client.set(QUEUE.wake, PLANTED)  # under the worker's wait, still blocked
    if how == "plain":
        kept = kit.tasks.record.delay("kept")  # written whole; the list not yet moved
        assert kept.get(timeout=DEADLINE) == "kept"  # (the worker's wait ends: <= 5 s)
        # its fetch, finding the queue empty, dropped the list: planted again
        wait_until(lambda: kit.blocked_in("blpop") >= 2, timeout=DEADLINE,
                   message="the idle worker blocked on its wake list again")
        kit.client.delete(QUEUE.wake)
        kit.client.set(QUEUE.wake, PLANTED)
        handle = kit.tasks.record.delay("woken")  # by enqueue.lua: the queue unknown
    elif how == "named":
        handle = kit.tasks.record.apply_async(("woken",), task_id="named-1")
    else:
        fresh = client_tasks(kit.server.client())
        handle = fresh.record.delay("woken")
    # moved aside by that call, kept for a person to look at; the key is minitask's again
    assert kit.client.get(QUEUE.wake + ":foreign") == PLANTED
    assert kit.client.type(QUEUE.wake) in (b"list", b"none")
    assert handle.get(timeout=DEADLINE) == "woken"
    assert len(kit.marks("done", "woken")) == 1

    send(worker, signal.SIGTERM)
    assert exit_code(worker) == 0
    text = log.read_text(errors="replace")
    assert "set aside" not in text and "Traceback" not in text, text[-3000:]
    if how == "first":
        fresh.app.close()
