"""ack_fetch.lua, the drain loop's round trip as one script call: the outcomes of
tasks of a queue, then the next fetch from it. It leaves what ack.lua then
fetch.lua leave as two calls (the path acks of several queues still take), with
the ack first: a max_running slot it frees is leased by its own fetch.

Runs on fakeredis and on the suite's own redis-server (``redis_client``).
"""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.wire.message import Outcome
from minitask.stores.queue import FetchTerms
from minitask.worker.child_loop import run_child
from tests.support.clock import ManualClock
from tests.support.scripts import record_script_calls, script_names

TERMS = FetchTerms(lease_ms=30_000, count=1, max_deliveries=5)


def _load_ack_script(app: Minitask) -> None:
    """Run ack.lua once, as a worker has before its drain: a batch whose first script
    Redis does not know yet runs that one again after the others (the transport)."""
    results = app.broker.results
    assert results.ack_many([results.prepare_ack("default", "unknown", None, 0)]) == [False]


def _fetch(app: Minitask, clock: ManualClock, queue: str = "default", lease_ms: int = 30_000,
           count: int = 1) -> List[str]:
    result = app.broker.queues.fetch(queue, now_ms=clock.now_ms(), lease_ms=lease_ms,
                                     count=count, max_deliveries=5)
    return [delivery.task_id for delivery in result.deliveries]


@pytest.mark.parametrize("path", ["one call", "two calls"])
def test_outcomes_then_a_fetch_leave_what_ack_then_fetch_leave(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any,
        path: str) -> None:
    app = make_app()

    @app.task(name="t")
    def t(n: int) -> int:
        return n

    @app.task(name="elsewhere", queue="other")
    def elsewhere() -> None:
        """Acked beside the others: acks of two queues go as separate calls."""

    k = QueueKeys(app.name, "default")
    kept, plain, lost, waiting = (t.apply_async((n,), task_id=name) for n, name in
                                  enumerate(("kept", "plain", "lost", "waiting")))
    assert _fetch(app, clock, count=2) == ["kept", "plain"]
    assert _fetch(app, clock, lease_ms=1_000) == ["lost"]
    clock.advance(2)  # its lease expires: it is delivered again, and retried by that holder
    again = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                    count=1, max_deliveries=5).deliveries[0]
    assert again.task_id == "lost"
    results = app.broker.results
    assert results.retry("default", again.message(), clock.now_ms() + 60_000,
                         Outcome("retrying", clock.now_ms(), message="again"))
    acks = [results.prepare_ack("default", "kept", Outcome("succeeded", clock.now_ms(),
                                                           value=10), 60_000),
            results.prepare_ack("default", "plain", None, 0),
            results.prepare_ack("default", "lost", None, 0)]  # the first holder, late
    if path == "two calls":
        other = elsewhere.delay()
        assert _fetch(app, clock, queue="other") == [other.id]
        acks.append(results.prepare_ack("other", other.id, None, 0))
    _load_ack_script(app)
    made = record_script_calls(app)
    held, reply = results.ack_then(acks, app.broker.queues.fetch_call("default",
                                                                      clock.now_ms(), TERMS))
    fetched = app.broker.queues.fetch_result(reply)
    if path == "one call":
        assert script_names(made) == [["ack_fetch"]]
        assert held == [True, True, False]
    else:
        assert script_names(made) == [["ack", "ack", "fetch"]]
        assert held == [True, True, False, True]
        assert redis_client.hlen(QueueKeys(app.name, "other").messages) == 0
    assert [d.task_id for d in fetched.deliveries] == ["waiting"]
    assert fetched.deliveries[0].delivery == 1 and fetched.deliveries[0].flow is False
    assert fetched.next_event_ms == clock.now_ms()  # leased all it asked for: look again
    assert kept.get(timeout=0) == 10
    assert not redis_client.exists(k.result("plain"))
    # the late outcome of the lost lease stands, and no trace of the retry is left
    assert redis_client.zcard(k.delayed) == 0 and redis_client.hlen(k.order) == 0
    assert redis_client.hlen(k.retrying) == 0
    assert redis_client.hkeys(k.messages) == [b"waiting"]
    assert redis_client.hkeys(k.deliveries) == [b"waiting"]
    assert redis_client.zrange(k.leases, 0, -1) == [b"waiting"]
    assert [plain.status(), lost.status(), waiting.status()] == ["unknown", "unknown",
                                                                 "running"]  # kept none


@pytest.mark.parametrize("path", ["one call", "two calls"])
def test_a_max_running_slot_the_outcome_frees_is_leased_by_the_same_round_trip(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any,
        path: str) -> None:
    app = make_app()

    @app.task(name="solo", max_running=1)
    def solo(n: int) -> int:
        return n

    @app.task(name="elsewhere", queue="other")
    def elsewhere() -> None:
        """Acked beside the others: acks of two queues go as separate calls."""

    first, second = solo.delay(1), solo.delay(2)
    results = app.broker.results
    leased = app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                     count=2, max_deliveries=5).deliveries
    assert [d.task_id for d in leased] == [first.id]  # the second is parked
    assert leased[0].flow is True
    acks = [results.prepare_ack("default", first.id, None, 0, flow=True)]
    if path == "two calls":
        other = elsewhere.delay()
        assert _fetch(app, clock, queue="other") == [other.id]
        acks.append(results.prepare_ack("other", other.id, None, 0, flow=False))
    _load_ack_script(app)
    made = record_script_calls(app)
    held, reply = results.ack_then(acks, app.broker.queues.fetch_call("default",
                                                                      clock.now_ms(), TERMS))
    assert script_names(made) == ([["ack_fetch"]] if path == "one call"
                                  else [["ack", "ack", "fetch"]])
    assert all(held)
    assert [d.task_id for d in app.broker.queues.fetch_result(reply).deliveries] == [second.id]
    assert first.status() == "unknown" and second.status() == "running"


def test_a_drain_sends_each_outcome_with_the_next_fetch_as_one_call(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task(name="t")
    def t(n: int) -> None:
        ran.append(n)

    handles = t.delay_many([(n,) for n in range(6)])
    made = record_script_calls(app)
    # the loop of a process pool's child, here in this process: it batches its outcomes
    run_child(app.worker(burst=True, prefetch=1), lambda job, message, timeout: None,
              lambda: None, lambda: None, lambda job: None)
    assert sorted(ran) == list(range(6))
    assert all(h.status() == "succeeded" for h in handles)
    # the first fetch, then each outcome with the next fetch (the last one finds none);
    # the read of the queue's schedules and the cancel watch's look at where its stream
    # ends (scripts of their own) may come between them
    names = [trip for trip in script_names(made)
             if trip not in (["schedule_armed"], ["request_cancel"])]
    assert names[:7] == [["fetch"]] + [["ack_fetch"]] * 6, names
    assert not any("ack" in trip for trip in names), names
