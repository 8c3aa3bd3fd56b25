"""An outcome is recorded once when Redis refuses the fetch that rides behind it: a
real worker on a real redis-server finishes a task while its queue's leases hold
data minitask did not write; the task's outcome is in the queue's record of recent
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
    worker = kit.worker("--pool", "thread", "-c", "1", "-Q", "a,b")
    assert kit.tasks.record.apply_async(("warm",), queue="a").get(timeout=DEADLINE) == "warm"
    handle = kit.tasks.slow.apply_async(("long", 2.0), queue="a")
    kit.wait_for_marks("started", "long")
    kit.client.delete(A.leases)  # the fetch behind the outcome meets someone's string
    kit.client.set(A.leases, b"someone's string")
    assert handle.get(timeout=DEADLINE) == "long"
    # the fetch behind the outcome is refused (the queue set aside), or the outcome's
    # own script has moved the string aside first (lib.lua, since review 13's round)
    wait_until(lambda: "set aside" in log.read_text(errors="replace")
               or kit.client.exists(A.leases + ":foreign"), timeout=DEADLINE,
               message="the queue set aside or its leases moved aside")
    entries = [unpack_entry("a", fields[b"e"]) for _, fields in kit.client.xrange(A.recent)]
    mine = [entry for entry in entries if entry is not None and entry.task_id == handle.id]
    assert len(mine) == 1, mine

    kit.client.delete(A.leases)
    assert kit.tasks.record.apply_async(("after",), queue="a").get(timeout=DEADLINE) == "after"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
