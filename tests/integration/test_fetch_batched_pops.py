"""The fifth performance pass's cuts in fetch.lua (issue 36) keep its answers.

A fetch of more than one task, flow control off, pops the ids of a ready list with one
``LPOP`` and a count, and serves them in turn; an entry that is no plain task (a group's
token) puts those popped after it back first. A fetch looks for a popped id in delayed
only when delayed held a task as it began, and in dead only when dead exists (one
``EXISTS``, when more than one task is wanted). On fakeredis and on the suite's own
redis-server (``redis_client``); the command counts on the server only.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

import pytest

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.queue import FetchResult
from tests.support.clock import ManualClock


def fetch(app: Minitask, clock: ManualClock, count: int) -> FetchResult:
    return app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000,
                                   count=count, max_deliveries=5)


def calls(client: Any) -> Dict[str, int]:
    stats = client.info("commandstats")
    return {name[len("cmdstat_"):]: value["calls"] for name, value in stats.items()}


def test_a_fetch_of_ten_skips_stale_entries_popped_ahead_and_keeps_the_order(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(name="t")
    def t(n: int) -> int:
        return n

    sent = [t.delay(i) for i in range(14)]
    k = QueueKeys("test", "default")
    ready = k.ready[4]  # priority 5, the default
    # stale entries among the ready ids: a cancelled one (no message), one also in
    # delayed (retried meanwhile), one also dead, and a second entry of a sent id
    redis_client.hdel(k.messages, sent[2].id)
    redis_client.zadd(k.delayed, {sent[4].id: clock.now_ms() * 10 + 10**9})
    redis_client.zadd(k.dead, {sent[6].id: clock.now_ms()})
    redis_client.lpush(ready, sent[0].id)
    stale = {sent[2].id, sent[4].id, sent[6].id}
    first = fetch(app, clock, 10)
    expected = [s.id for s in sent if s.id not in stale]
    # ten popped at once, four of them stale (the second entry of sent[0] dropped at its
    # turn), then the four still wanted
    assert [d.task_id for d in first.deliveries] == expected[:10]
    second = fetch(app, clock, 10)
    assert [d.task_id for d in second.deliveries] == expected[10:]
    assert redis_client.llen(ready) == 0


def test_a_token_among_ids_popped_ahead_puts_those_after_it_back_in_order(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(name="t")
    def t(n: int) -> int:
        return n

    sent = [t.delay(i) for i in range(6)]
    k = QueueKeys("test", "default")
    ready = k.ready[4]
    # a group's token whose group is gone (flow control off): dropped, the ids after it
    # served in their order all the same
    redis_client.linsert(ready, "BEFORE", sent[2].id, b"\xff1.1/\xffgone")
    got = fetch(app, clock, 10)
    assert [d.task_id for d in got.deliveries] == [s.id for s in sent]
    assert redis_client.llen(ready) == 0


def test_a_fetch_of_ten_from_a_plain_queue_pops_once_and_looks_in_neither_set(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    if "Fake" in type(redis_client).__name__:
        pytest.skip("command counts: the real server only")
    app = make_app()

    @app.task(name="t")
    def t(n: int) -> int:
        return n

    t.delay_many([(i,) for i in range(10)])
    redis_client.config_resetstat()
    assert len(fetch(app, clock, 10).deliveries) == 10
    counted = calls(redis_client)
    assert counted.get("lpop") == 1
    assert "zscore" not in counted  # delayed and dead both empty


def test_a_due_task_and_a_future_one_are_both_found_with_one_first_read(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(name="t")
    def t(n: int) -> int:
        return n

    soon, later = t.apply_in(1, 1), t.apply_in(3600, 2)
    assert fetch(app, clock, 1).deliveries == []
    clock.advance(2)
    got = fetch(app, clock, 5)
    assert [d.task_id for d in got.deliveries] == [soon.id]
    # nothing promoted by a fetch that found the first task not due: its next event
    # is that task's due time, read from the first read
    assert got.next_event_ms is not None and got.next_event_ms > clock.now_ms()
    assert later.status() == "scheduled"
