"""The thread and asyncio pools drain with one script call per task: the thread that
ends a task records its outcome with the next fetch (ack_fetch.lua) and runs what it
leased. Counted on a real redis-server (``INFO commandstats``)."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, List

import pytest
import redis

from minitask import Minitask
from minitask.worker import sources

pytestmark = [pytest.mark.integration, pytest.mark.app("trips", on="server")]

TASKS = 300
DEADLINE = 60.0


def script_calls(client: "redis.Redis[bytes]") -> int:
    """Script calls the server took so far (EVALSHA, and EVAL when a script was loaded)."""
    stats: Dict[str, Dict[str, Any]] = client.info("commandstats")  # type: ignore[assignment]
    return sum(int(stats.get(name, {}).get("calls", 0))
               for name in ("cmdstat_evalsha", "cmdstat_eval"))


def drained(app: Minitask, worker: Any) -> int:
    """Run ``worker`` in burst mode (bounded); the script calls it made."""
    client = app.broker.client
    before = script_calls(client)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(timeout=DEADLINE)
    assert not thread.is_alive(), "the burst worker did not end"
    return script_calls(client) - before


def test_thread_pool_records_each_outcome_with_the_next_fetch(app: Minitask) -> None:
    ran: List[int] = []
    threads = set()

    @app.task
    def step(index: int) -> int:
        threads.add(threading.get_ident())
        time.sleep(0.001)  # both threads busy at once
        ran.append(index)
        return index

    handles = step.delay_many([(index,) for index in range(TASKS)])
    calls = drained(app, app.worker(pool="thread", concurrency=2, burst=True))

    assert sorted(ran) == list(range(TASKS))
    assert len(threads) == 2
    assert [handle.get(timeout=DEADLINE) for handle in handles] == list(range(TASKS))
    # a fetch and an ack of its own per task made 2 x TASKS before; a few more here are
    # the start (queues registered), the first fetch of each thread, and the last looks
    assert calls <= TASKS + 20, f"{calls} script calls for {TASKS} tasks"
    counts = app.broker.queues.counts("default")
    assert counts["running"] == 0 and counts["ready"] == 0


def test_asyncio_pool_records_each_outcome_with_the_next_fetch(app: Minitask) -> None:
    ran: List[int] = []

    @app.task(ignore_result=True)
    async def nap(index: int) -> None:
        await asyncio.sleep(0.001)
        ran.append(index)

    nap.delay_many([(index,) for index in range(TASKS)])
    calls = drained(app, app.worker(pool="asyncio", concurrency=4, burst=True))

    assert sorted(ran) == list(range(TASKS))
    assert calls <= TASKS + 20, f"{calls} script calls for {TASKS} tasks"
    counts = app.broker.queues.counts("default")
    assert counts["running"] == 0 and counts["ready"] == 0


def test_thread_pool_with_prefetch_records_every_outcome_by_its_end(app: Minitask) -> None:
    """At prefetch 10 outcomes wait (up to ACK_WINDOW) to go with the next ones: none is
    left unrecorded when the worker ends, and fewer calls than tasks are made."""
    @app.task
    def double(index: int) -> int:
        return index * 2

    handles = double.delay_many([(index,) for index in range(TASKS)])
    calls = drained(app, app.worker(pool="thread", concurrency=3, prefetch=10, burst=True))

    assert [handle.get(timeout=DEADLINE) for handle in handles] == [
        index * 2 for index in range(TASKS)]
    assert calls < TASKS, f"{calls} script calls for {TASKS} tasks at prefetch 10"
    counts = app.broker.queues.counts("default")
    assert counts["running"] == 0 and counts["ready"] == 0


def test_a_second_queue_is_fetched_from_once_per_task(app: Minitask) -> None:
    """Behind the outcome the fetch is from the first queue; when it leased nothing the
    thread's next fetch starts at the second queue (not the first again)."""
    ran: List[int] = []

    @app.task(queue="second", ignore_result=True)
    def later(index: int) -> None:
        ran.append(index)

    later.delay_many([(index,) for index in range(TASKS)])
    calls = drained(app, app.worker(queues=["first", "second"], pool="thread", burst=True))

    assert sorted(ran) == list(range(TASKS))
    # the ack (a call of its own: another queue's) with an empty fetch from "first" in
    # one round trip, then a fetch from "second": four calls per task when "first" was
    # fetched from again
    assert calls <= 3 * TASKS + 20, f"{calls} script calls for {TASKS} tasks"


@pytest.mark.parametrize("age, served", [(0.005, "second"), (0.030, "first")])
def test_a_look_behind_outcomes_counts_while_younger_than_its_round_trip(
        app: Minitask, monkeypatch: pytest.MonkeyPatch, age: float, served: str) -> None:
    """A fetch behind outcomes that found the first queue empty stands for it in the
    thread's next fetch while it is younger than its own round trip (here 10 ms): the
    second queue is asked straight away. Older (the outcome's hooks took long), the
    first queue is asked again, and a task that came to it meanwhile goes first."""
    @app.task(queue="first", ignore_result=True)
    def urgent() -> None:
        """Sent to the first queue after it was looked at."""

    @app.task(queue="second", ignore_result=True)
    def later() -> None:
        """Waiting in the second queue."""

    source = app.worker(queues=["first", "second"])._queues
    # the look's round trip sent at 100.0, answered at 100.010; the next fetch `age` later
    readings = iter([100.0, 100.010, 100.010 + age])
    monkeypatch.setattr(sources, "monotonic", lambda: next(readings))
    held, result = source.ack_and_fetch([])
    assert held == [] and result.deliveries == []
    later.delay()
    urgent.delay()

    job = source.next_job()

    assert job is not None and job.queue == served
