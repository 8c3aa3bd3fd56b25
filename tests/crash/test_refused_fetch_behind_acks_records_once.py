"""An outcome is recorded once when Redis refuses the fetch that rides behind it: a
real worker on a real redis-server finishes a task while Redis refuses its queue's
fetch (tests/apps/refusing.py); the task's outcome is in the queue's record of recent
outcomes once.

Before (review 11, F2), ack_fetch.lua wrote the acks, then the fetch behind them
raised; the worker took the whole call for refused and recorded the acks again: two
entries in the record (and a "lease had expired" warning from the second).
"""
from __future__ import annotations

import signal

import pytest

from minitask.broker.keys import QueueKeys
from minitask.stores.recent import unpack_entry
from tests.support.crash_kit import DEADLINE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

A = QueueKeys("basic", "a")


def test_an_outcome_with_a_refused_fetch_behind_it_is_recorded_once(kit: Kit) -> None:
    log = kit.logs / "worker-0.log"
    flag = kit.logs / "refuse"
    worker = kit.worker("--pool", "thread", "-c", "1", "-Q", "a,b",
                        app="tests.apps.refusing", TEST_REFUSED_QUEUE="a",
                        TEST_REFUSED_WHILE=str(flag))
    assert kit.tasks.record.apply_async(("warm",), queue="a").get(timeout=DEADLINE) == "warm"
    handle = kit.tasks.slow.apply_async(("long", 2.0), queue="a")
    kit.wait_for_marks("started", "long")
    flag.touch()  # Redis refuses the fetch behind the outcome (tests/apps/refusing.py)
    assert handle.get(timeout=DEADLINE) == "long"
    wait_until(lambda: "set aside" in log.read_text(errors="replace"), timeout=DEADLINE,
               message="the queue set aside")
    entries = [unpack_entry("a", fields[b"e"]) for _, fields in kit.client.xrange(A.recent)]
    mine = [entry for entry in entries if entry is not None and entry.task_id == handle.id]
    assert len(mine) == 1, mine

    flag.unlink()
    assert kit.tasks.record.apply_async(("after",), queue="a").get(timeout=DEADLINE) == "after"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
