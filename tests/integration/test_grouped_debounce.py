"""Debounce of grouped tasks (fair queues): the latest call's arguments run, once,
after the quiet period, as for an ungrouped task; the group's limits still hold.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``).
Before the fix, enqueue_flow.lua read the debounce flag at the end of the spec, where
a grouped spec holds its group: the second call was dropped (the first call's
arguments ran, at the first call's due time), and a group named ``1`` debounced a
call that asked for no debounce.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Tuple

import pytest

from minitask import Minitask
from tests.support.clock import ManualClock
from tests.support.draining import drain
from tests.support.fair import fetch
from tests.support.servers import RedisServer


def _grouped_app(make_app: Callable[..., Minitask], clock: ManualClock,
                 **options: Any) -> Tuple[Minitask, Any, List[Tuple[str, int, int]]]:
    app = make_app()
    ran: List[Tuple[str, int, int]] = []

    @app.task(group_by="tenant", name="gjob", **options)
    def gjob(tenant: str, n: int) -> None:
        ran.append((tenant, n, clock.now_ms()))

    return app, gjob, ran


def test_a_grouped_debounced_call_replaces_the_scheduled_one(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, gjob, ran = _grouped_app(make_app, clock)
    worker = app.worker()
    start = clock.now_ms()
    gjob.apply_async(("DB", 1), task_id="d", debounce=2)
    clock.advance(1)
    handle = gjob.apply_async(("DB", 2), task_id="d", debounce=2)
    assert handle.status() == "scheduled"
    clock.ms = start + 2000  # the first call's due time: nothing runs
    assert drain(worker) == 0
    clock.ms = start + 3000  # the last call's
    assert drain(worker) == 1
    assert ran == [("DB", 2, start + 3000)]
    assert drain(worker) == 0  # once
    assert app.broker.flow.specs("default") == {}


def test_a_call_s_own_group_debounces_too(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task(name="plain")
    def plain(n: int) -> None:
        ran.append(n)

    for n in range(5):
        plain.apply_async((n,), task_id="p", debounce=0.5, group="acme")
        clock.advance(0.1)
    clock.advance(0.5)
    assert drain(app.worker()) == 1
    assert ran == [4]


def test_a_debounced_call_may_move_to_another_group(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, gjob, ran = _grouped_app(make_app, clock)
    gjob.apply_async(("A", 1), task_id="d", debounce=1)
    gjob.apply_async(("B", 2), task_id="d", debounce=1)
    clock.advance(2)
    assert drain(app.worker()) == 1
    assert [(tenant, n) for tenant, n, _ in ran] == [("B", 2)]


def test_a_group_named_1_does_not_debounce_a_call_that_asked_for_none(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, gjob, ran = _grouped_app(make_app, clock)
    gjob.apply_async(("x", 1), task_id="s", delay=5, group=1)
    gjob.apply_async(("x", 2), task_id="s", delay=1, group=1)  # pending: left as it is
    clock.advance(2)
    assert drain(app.worker()) == 0
    clock.advance(4)
    assert drain(app.worker()) == 1
    assert [n for _, n, _ in ran] == [1]


def test_group_max_running_holds_for_debounced_calls(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, gjob, ran = _grouped_app(make_app, clock, group_max_running=1)
    for n in range(3):
        gjob.apply_async(("A", n), task_id="one", debounce=1)
        gjob.apply_async(("A", 10 + n), task_id="two", debounce=1)
    clock.advance(2)
    first = fetch(app, clock, count=5)
    assert [d.message().args for d in first.deliveries] in (
        [["A", 2]], [["A", 12]])  # one at a time in the group, each the last call's
    assert fetch(app, clock, count=5).deliveries == []


def test_a_batch_debounces_grouped_calls(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, gjob, ran = _grouped_app(make_app, clock)
    with app.batch():
        gjob.apply_async(("DB", 1), task_id="d", debounce=1)
    clock.advance(0.5)
    with app.batch():
        gjob.apply_async(("DB", 2), task_id="d", debounce=1)
    clock.advance(0.6)
    assert drain(app.worker()) == 0  # the first call's due time has passed
    clock.advance(0.5)
    assert drain(app.worker()) == 1
    assert [n for _, n, _ in ran] == [2]


@pytest.mark.integration
def test_the_async_producer_debounces_grouped_calls(redis_server: RedisServer) -> None:
    redis_server.client().flushall()
    clock = ManualClock()
    app = Minitask("grouped-debounce-async", broker=redis_server.url, clock=clock)
    ran: List[int] = []

    @app.task(group_by="tenant", name="gjob")
    def gjob(tenant: str, n: int) -> None:
        ran.append(n)

    async def send() -> None:
        try:
            await gjob.aapply_async(("DB", 1), task_id="d", debounce=1)
            clock.advance(0.5)
            await gjob.aapply_async(("DB", 2), task_id="d", debounce=1)
        finally:
            await app.aclose()

    try:
        asyncio.run(asyncio.wait_for(send(), 30))
        clock.advance(0.6)
        assert drain(app.worker()) == 0
        clock.advance(0.5)
        assert drain(app.worker()) == 1
        assert ran == [2]
    finally:
        app.close()


def test_a_retry_holding_its_group_s_slot_keeps_its_group_when_debounced(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    """With group_max_running, a retry waiting in the schedule holds its group's slot;
    a debounce naming another group keeps the call in its own (moved, the slot was
    never freed: the old group's next task never ran; review 12)."""
    failing = {"x": True}
    app = make_app()
    ran: List[Tuple[str, int]] = []

    @app.task(group_by="tenant", name="gjob", group_max_running=1, retries=3,
              retry_backoff=10)
    def gjob(tenant: str, n: int) -> None:
        ran.append((tenant, n))
        if n == 1 and failing["x"]:
            failing["x"] = False
            raise RuntimeError("the first attempt fails")

    worker = app.worker()
    gjob.apply_async(("A", 1), task_id="x")
    assert drain(worker) == 1  # failed, retried: holds A's slot while it waits
    gjob.apply_async(("A", 2))
    assert drain(worker) == 0  # A at its limit
    gjob.apply_async(("B", 3), task_id="x", debounce=1)  # the retry replaced
    clock.advance(2)
    assert drain(worker) == 2  # x (its new arguments, in A), then A's next
    assert ran == [("A", 1), ("B", 3), ("A", 2)]
    assert app.broker.flow.specs("default") == {}
