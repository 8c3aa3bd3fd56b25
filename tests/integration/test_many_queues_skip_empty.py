"""A worker serving many queues, most of them empty, fetches only those that may
have work (issue 29, issue 36), on a real redis-server: a queue a fetch found empty
is skipped until its wake list holds a token (a task sent to it), this worker's
wait takes one, or its next event comes; the queue order holds all the same.

Before, every task cost one fetch per queue served: 600 queues drained a few
tasks a second.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Iterator, List, Optional

import pytest

from minitask import Minitask
from minitask.stores.queue import FetchTerms, QueueStore
from minitask.worker.loop import Worker
from minitask.worker.sources import QueueSource
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

QUEUES = [f"q{index}" for index in range(60)]
LAST = QUEUES[-1]
#: How long a worker may take to run a task on a busy shared machine (s).
DEADLINE = 30.0


@pytest.fixture
def ran() -> List[str]:
    return []


@pytest.fixture
def many(redis_server: RedisServer, admin: Any, ran: List[str]) -> Iterator[Minitask]:
    made = Minitask("many", broker=redis_server.url)

    @made.task(queue=LAST, name="work")
    def work(tag: str) -> str:
        ran.append(tag)
        if tag == "send-early":  # sent while the worker runs: before its next fetch
            work.apply_async(("early",), queue=QUEUES[0])
            work.apply_async(("middle",), queue=QUEUES[30])
        return tag

    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def fetches(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every fetch script call made, by queue (a fetch alone, behind outcomes or a wait)."""
    counted: Counter[str] = Counter()
    real = QueueStore.fetch_call

    def fetch_call(self: QueueStore, queue: str, now_ms: Optional[int],
                   terms: FetchTerms) -> Any:
        counted[queue] += 1
        return real(self, queue, now_ms, terms)

    monkeypatch.setattr(QueueStore, "fetch_call", fetch_call)
    return counted


def send(app: Minitask, tags: List[str], queue: str = LAST, delay: float = 0.0) -> None:
    for tag in tags:
        app.tasks["work"].apply_async((tag,), queue=queue, delay=delay or None)


def queue_source(worker: Worker) -> QueueSource:
    found: Any = worker._queues  # (the source behind schedules and broadcasts)
    assert isinstance(found, QueueSource)
    return found


def run(worker: Worker, times: int) -> None:
    for _ in range(times):
        assert worker.run_once()


def test_a_worker_of_many_queues_fetches_about_once_per_task(
        many: Minitask, ran: List[str], fetches: Counter[str]) -> None:
    tags = [f"t{index}" for index in range(40)]
    send(many, tags)
    many.worker(queues=QUEUES, burst=True, prefetch=1).run()
    assert ran == tags
    # the first walk fetches every queue once; then the last queue about once a task
    # (before: every queue, once a task: 60 x 40)
    others = sum(count for queue, count in fetches.items() if queue != LAST)
    assert others <= 2 * len(QUEUES), fetches
    assert fetches[LAST] <= 2 * len(tags) + 2, fetches


def test_a_task_sent_to_a_queue_found_empty_is_served_in_queue_order(
        many: Minitask, ran: List[str], fetches: Counter[str]) -> None:
    send(many, ["a", "b", "send-early", "c", "d"])
    worker = many.worker(queues=QUEUES, prefetch=1)
    run(worker, 7)
    # sent by "send-early" to the first queue and the 31st, both found empty before
    assert ran == ["a", "b", "send-early", "early", "middle", "c", "d"]
    assert not worker.run_once()


def test_a_token_the_wait_takes_has_its_queue_fetched(many: Minitask, ran: List[str],
                                                      fetches: Counter[str]) -> None:
    send(many, ["a"])
    worker = many.worker(queues=QUEUES, prefetch=1)
    run(worker, 1)
    assert not worker.run_once()  # every queue found empty: marked
    source = queue_source(worker)
    now = many.clock.now_ms()
    assert source.empties.marked(QUEUES[20], now)
    send(many, ["late-sent"], queue=QUEUES[20])
    fetches.clear()
    source.wait()  # takes the token of queue 20 off its wake list (none left there)
    assert not source.empties.marked(QUEUES[20], many.clock.now_ms())
    assert worker.run_once()
    assert ran == ["a", "late-sent"]
    assert sum(fetches.values()) <= 3, fetches  # the first queue behind the wait, then 20


def test_a_delayed_task_of_a_queue_found_empty_is_waited_for(many: Minitask,
                                                             ran: List[str]) -> None:
    send(many, ["later"], queue=QUEUES[10], delay=60.0)
    worker = many.worker(queues=QUEUES, prefetch=1)
    assert not worker.run_once()
    source = queue_source(worker)
    due = source.next_event_ms
    assert due is not None and due > many.clock.now_ms() + 50_000
    assert source.empties.marked(QUEUES[10], many.clock.now_ms())
    # skipped now, its due time still ends the worker's wait
    assert not worker.run_once()
    assert source.next_event_ms == due
    assert source.planned_wait() <= 5.0 and source.next_event_ms == due


def test_an_idle_worker_runs_a_task_sent_to_a_queue_found_empty(
        many: Minitask, ran: List[str]) -> None:
    send(many, ["a", "b"])
    worker = many.worker(queues=QUEUES, prefetch=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: ran == ["a", "b"], timeout=DEADLINE)  # (the queues walked)
        for tag, queue in (("x", QUEUES[5]), ("y", QUEUES[45]), ("z", QUEUES[0])):
            send(many, [tag], queue=queue)
            wait_until(lambda: ran[-1:] == [tag], timeout=DEADLINE)  # noqa: B023
    finally:
        worker.stop()
        thread.join(DEADLINE)
    assert not thread.is_alive()
    assert ran == ["a", "b", "x", "y", "z"]
