"""The start-up warning of a durability the replicas cannot meet says how many outcomes
the worker confirms at once: one per slot on the thread and process pools, and on the
asyncio pool no more than its recording threads (confirmed writes never go from its
loop), whatever its concurrency. It said "about one task a second per slot", which was
true of no asyncio pool past four slots, nor of any timeout but one second."""
from __future__ import annotations

from minitask.broker.health import replica_warning
from minitask.worker.pools.coroutines import RECORDERS, confirming


def test_the_asyncio_pool_confirms_at_most_its_recording_threads_at_once() -> None:
    assert confirming("asyncio", 100)[0] == RECORDERS == 4
    assert confirming("asyncio", 2)[0] == 2
    assert confirming("thread", 8)[0] == 8
    assert confirming("process", 3)[0] == 3
    assert "recording thread" in confirming("asyncio", 100)[1]


def test_the_warning_gives_the_workers_own_pace() -> None:
    text = replica_warning("replicated", 1, 0, 0.5, confirming("asyncio", 100)) or ""
    assert "at most 4 at once" in text and "4 recording thread(s)" in text, text
    assert "about 8 task(s) a second" in text, text  # 4 at once, each waiting 0.5 s
    assert "per slot" not in text
    text = replica_warning("replicated", 1, 0, 2.0, confirming("thread", 10)) or ""
    assert "at most 10 at once (one per slot), about 5 task(s) a second" in text, text


def test_without_a_worker_the_warning_names_no_pace_of_its_own() -> None:
    text = replica_warning("replicated", 2, 1, 1.0) or ""
    assert "one outcome at a time" in text and "at most four at once" in text, text
