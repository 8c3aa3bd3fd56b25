"""Ordering: priority then FIFO inside a queue, strict queue order, delayed tasks joining.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``).
Order is recorded by the tasks themselves, in a Python list, as they run.
"""
from __future__ import annotations

import random
from typing import Any, Callable, List, Tuple

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.draining import drain


def test_tasks_run_by_priority_nine_first_and_fifo_within_a_priority(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    order: List[Tuple[int, int]] = []

    @app.task
    def record(priority: int, index: int) -> None:
        order.append((priority, index))

    rng = random.Random(1234)
    sent = []
    for index in range(300):
        priority = rng.randrange(10)
        record.apply_async((priority, index), priority=priority)
        sent.append((priority, index))

    assert drain(app.worker()) == 300
    assert order == sorted(sent, key=lambda pair: (-pair[0], pair[1]))


def test_burst_worker_runs_tasks_in_priority_then_fifo_order(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    order: List[Tuple[int, int]] = []

    @app.task(priority=3)
    def low(index: int) -> None:
        order.append((3, index))

    @app.task(priority=8)
    def high(index: int) -> None:
        order.append((8, index))

    rng = random.Random(99)
    sent = []
    for index in range(200):
        if rng.random() < 0.5:
            low.delay(index)
            sent.append((3, index))
        else:
            high.delay(index)
            sent.append((8, index))

    app.worker(burst=True).run()
    assert order == sorted(sent, key=lambda pair: (-pair[0], pair[1]))


def test_equal_priority_is_strictly_fifo_across_enqueue_methods(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    order: List[int] = []

    @app.task
    def record(index: int) -> None:
        order.append(index)

    record.delay(0)
    record.apply_async((1,))
    record.delay_many([(2,), (3,)])
    record.apply_in(0, 4)
    record.apply_at(clock.ms / 1000 - 1, 5)
    record.delay(6)
    drain(app.worker())
    assert order == list(range(7))


def test_a_later_queue_is_served_only_while_earlier_queues_are_empty(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    order: List[str] = []

    @app.task(queue="low", priority=9)
    def in_low(label: str) -> None:
        order.append(label)
        if label == "low-1":
            in_high.delay("high-late")  # arrives while low is being served

    @app.task(queue="default", priority=0)
    def in_default(label: str) -> None:
        order.append(label)

    @app.task(queue="high", priority=0)
    def in_high(label: str) -> None:
        order.append(label)

    for i in range(1, 4):
        in_low.delay(f"low-{i}")
    for i in range(1, 3):
        in_default.delay(f"default-{i}")
    in_high.delay("high-1")

    drain(app.worker(queues=["high", "default", "low"]))
    assert order == ["high-1", "default-1", "default-2", "low-1", "high-late", "low-2",
                     "low-3"]


def test_queue_order_beats_priority(make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    order: List[str] = []

    @app.task
    def record(label: str) -> None:
        order.append(label)

    record.apply_async(("second-queue-p9",), queue="b", priority=9)
    record.apply_async(("first-queue-p0",), queue="a", priority=0)
    drain(app.worker(queues=["a", "b"]))
    assert order == ["first-queue-p0", "second-queue-p9"]


def test_worker_ignores_queues_it_was_not_given(make_app: Callable[..., Minitask],
                                                redis_client: Any) -> None:
    app = make_app()
    order: List[str] = []

    @app.task(queue="other")
    def elsewhere() -> None:
        order.append("other")

    handle = elsewhere.delay()
    assert drain(app.worker(queues=["default"])) == 0
    assert order == []
    assert handle.status() == "queued"


def test_default_worker_serves_the_default_queue_first_then_queues_by_name(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app(default_queue="main")
    order: List[str] = []

    def make(queue: str) -> Any:
        @app.task(queue=queue, name=f"record.{queue}")
        def record() -> None:
            order.append(queue)
        return record

    tasks = {queue: make(queue) for queue in ("zeta", "alpha", "main", "beta")}

    @app.task  # no queue: the default one
    def plain() -> None:
        order.append("main")

    assert app.worker().queues == ["main", "alpha", "beta", "zeta"]
    assert app.worker_queues() == ["main", "alpha", "beta", "zeta"]
    for queue in ("zeta", "beta", "alpha", "main"):
        tasks[queue].delay()
        tasks[queue].delay()
    plain.delay()
    drain(app.worker())
    assert order == ["main"] * 3 + ["alpha"] * 2 + ["beta"] * 2 + ["zeta"] * 2


# -- delayed tasks --------------------------------------------------------------

def test_delayed_task_is_not_fetched_before_its_eta(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task
    def job(n: int) -> None:
        ran.append(n)

    handle = job.apply_in(10, 1)
    worker = app.worker()
    assert worker.run_once() is False
    clock.advance(9.999)
    assert worker.run_once() is False
    assert ran == []
    assert handle.status() == "scheduled"
    clock.advance(0.001)
    assert worker.run_once() is True
    assert ran == [1]
    assert handle.status() == "succeeded"


def test_burst_worker_leaves_tasks_due_later_and_runs_them_once_due(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    ran: List[str] = []

    @app.task
    def job(label: str) -> None:
        ran.append(label)

    later = job.apply_in(3600, "later")
    job.delay("now")
    app.worker(burst=True).run()
    assert ran == ["now"]
    assert later.status() == "scheduled"
    clock.advance(3600)
    app.worker(burst=True).run()
    assert ran == ["now", "later"]


def test_due_delayed_tasks_join_their_priority_in_the_order_they_became_due(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    order: List[str] = []

    @app.task
    def record(label: str) -> None:
        order.append(label)

    record.apply_async(("ready-p5-a",), priority=5)
    record.apply_async(("due-at-10-p5",), priority=5, delay=10)
    record.apply_async(("due-at-5-p5",), priority=5, delay=5)
    record.apply_async(("due-at-20-p9",), priority=9, delay=20)
    record.apply_async(("due-at-7-p1",), priority=1, delay=7)
    record.apply_async(("due-at-15-p5",), priority=5, delay=15)
    record.apply_async(("ready-p5-b",), priority=5)
    record.apply_async(("due-at-100-p9",), priority=9, delay=100)

    clock.advance(30)
    drain(app.worker())
    assert order == ["due-at-20-p9", "ready-p5-a", "ready-p5-b", "due-at-5-p5",
                     "due-at-10-p5", "due-at-15-p5", "due-at-7-p1"]
    clock.advance(70)
    drain(app.worker())
    assert order[-1] == "due-at-100-p9"


def test_due_tasks_go_behind_tasks_already_waiting_at_their_priority(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    order: List[str] = []

    @app.task
    def record(label: str) -> None:
        order.append(label)

    record.apply_in(5, "delayed")
    record.delay("waiting-1")
    record.delay("waiting-2")
    clock.advance(5)
    drain(app.worker())
    assert order == ["waiting-1", "waiting-2", "delayed"]


def test_delayed_tasks_due_at_the_same_time_run_in_the_order_they_were_enqueued(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    """Equal priority is strictly FIFO: tasks due at the same instant keep enqueue order."""
    app = make_app()
    order: List[int] = []

    @app.task
    def record(index: int) -> None:
        order.append(index)

    for index in range(40):
        record.apply_in(60, index)
    clock.advance(60)
    drain(app.worker())
    assert order == list(range(40))


def test_a_due_task_joins_its_queue_at_the_next_fetch_behind_plain_delays_before_it(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    """The ordering rule since the script-free ``delay()``: a due task joins its
    queue when a worker next fetches (idle workers wake at its due time), behind
    what is there by then, plain ``delay()`` calls sent after it fell due included;
    a call that runs the enqueue script (``delay_many``, a ``task_id``) promotes it
    first."""
    app = make_app()
    order: List[str] = []

    @app.task
    def record(label: str) -> None:
        order.append(label)

    record.apply_in(5, "due-at-5")
    record.apply_in(6, "due-at-6")
    clock.advance(7)
    record.delay("plain-at-7")  # no script: promotes nothing
    record.delay_many([("many-at-7",)])  # the script promotes both first
    record.delay("plain-after")
    drain(app.worker())
    assert order == ["plain-at-7", "due-at-5", "due-at-6", "many-at-7", "plain-after"]


def test_delayed_task_does_not_fire_twice_with_two_workers(
        make_app: Callable[..., Minitask], clock: Any) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task
    def job(n: int) -> None:
        ran.append(n)

    for n in range(20):
        job.apply_in(1 + n % 3, n)
    clock.advance(5)
    first, second = app.worker(), app.worker()
    while first.run_once() | second.run_once():
        pass
    assert sorted(ran) == list(range(20))


# -- bulk --------------------------------------------------------------------

@pytest.mark.parametrize("count", [1000, 2100])
def test_delay_many_enqueues_every_call_and_keeps_their_order(
        make_app: Callable[..., Minitask], redis_client: Any, count: int) -> None:
    app = make_app()
    order: List[int] = []

    @app.task(priority=6)
    def record(index: int, label: str) -> None:
        order.append(index)

    handles = record.delay_many((i, f"call-{i}") for i in range(count))
    assert len(handles) == count
    assert len({h.id for h in handles}) == count
    keys = QueueKeys(app.name, "default")
    assert app.broker.queues.counts("default")["ready"] == count
    assert redis_client.hlen(keys.messages) == count
    app.worker(burst=True).run()
    assert order == list(range(count))
    assert app.broker.queues.counts("default")["ready"] == 0
    assert redis_client.hlen(keys.messages) == 0
    assert handles[0].get(timeout=5) is None and handles[-1].status() == "succeeded"


def test_delay_many_of_nothing_enqueues_nothing(make_app: Callable[..., Minitask],
                                                redis_client: Any) -> None:
    app = make_app()

    @app.task
    def record(index: int) -> None:
        pass

    assert record.delay_many([]) == []
    assert app.broker.queues.counts("default")["ready"] == 0


def test_promotion_in_batches_keeps_equal_due_times_in_enqueue_order(
        make_app: Callable[..., Minitask], clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full batch that cuts a run of equal due times leaves that run for the next
    batch, so ids (which the delayed ZSET sorts ties by) never decide the order."""
    monkeypatch.setattr("minitask.stores.queue.BATCH_LIMIT", 4)
    app = make_app()
    order: List[str] = []

    @app.task
    def record(label: str) -> None:
        order.append(label)

    record.apply_async(("first",), delay=1, task_id="a")
    labels = ["z4", "z3", "z2", "z1"]  # enqueue order is the reverse of id order
    for label in labels:
        record.apply_async((label,), delay=2, task_id=label)
    clock.advance(3)
    drain(app.worker())
    assert order == ["first", *labels]


def test_fetch_after_a_mass_cancel_drops_stale_entries_a_batch_per_call(
        make_app: Callable[..., Minitask], clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled tasks leave entries behind in the ready lists; one fetch drops at most
    a batch of them, so no script call blocks Redis for long, and asks to be called
    again at once."""
    monkeypatch.setattr("minitask.stores.queue.BATCH_LIMIT", 4)
    app = make_app()
    ran: List[int] = []

    @app.task
    def record(index: int) -> None:
        ran.append(index)

    cancelled = record.delay_many([(i,) for i in range(10)])
    assert all(handle.cancel() for handle in cancelled)
    record.delay(99)
    worker = app.worker()

    assert worker.fetch() is None, "only four stale entries dropped: no task reached yet"
    assert worker._queues.next_event_ms == clock.ms, "the worker is told to fetch again at once"
    assert app.broker.queues.counts("default")["ready"] == 1
    app.worker(burst=True).run()
    assert ran == [99]
