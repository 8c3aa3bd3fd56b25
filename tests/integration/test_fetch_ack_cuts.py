"""The third performance pass's cuts in fetch.lua and ack.lua keep their answers.

On fakeredis and on the suite's own redis-server (``redis_client``): a fetch that
leased all it asked for says "look again" instead of reading the next event; an
ack without a result passes no result key and writes none; an ack of a lost lease
still clears the task from delayed and order (the new holder had retried it).

The fourth pass (issue 18) sends Redis numbers as text where the script has them:
a lease score is the deadline's digits and one more, a result's expiry and the
batch limit go as they came; the scores and expiries are the same numbers. Its
fetch also leases with ZADD NX in place of a ZSCORE in leases (a stale second
entry of a held task is dropped all the same), skips runs of empty ready lists
with one EXISTS, and tells a printable ASCII id by one anchored match. An ack
passes no flow keys (and reads no HLEN) for tasks whose fetch found no flow
control in the queue: none of them can hold a spec or a max_running slot.
"""
from __future__ import annotations

from typing import Any, Callable, Tuple

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.wire.message import Outcome
from minitask.stores.queue import Delivery, FetchResult, FetchTerms
from tests.support.clock import ManualClock


def fetch(app: Minitask, clock: ManualClock, count: int = 1,
          lease_ms: int = 30_000) -> FetchResult:
    return app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=lease_ms,
                                   count=count, max_deliveries=5)


def app_with_t(make_app: Callable[..., Minitask]) -> Tuple[Minitask, Any]:
    """A fresh app with one task, ``t``, that returns its argument."""
    app = make_app()

    @app.task(name="t")
    def t(n: int) -> int:
        return n

    return app, t


def test_a_full_fetch_says_look_again_and_a_short_one_still_reads_the_next_event(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app, t = app_with_t(make_app)

    t.delay_many([(1,), (2,)])
    later = t.apply_in(60, 3)
    full = fetch(app, clock, count=1)
    assert len(full.deliveries) == 1 and full.next_event_ms == clock.now_ms()
    short = fetch(app, clock, count=5)  # one left: the next event is read
    assert len(short.deliveries) == 1
    assert short.next_event_ms is not None and short.next_event_ms > clock.now_ms()
    assert later.status() == "scheduled"


def test_an_ack_keeping_no_result_writes_none_and_one_keeping_a_result_does(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app, t = app_with_t(make_app)

    a, b = t.delay(1), t.delay(2)
    leased = fetch(app, clock, count=2).deliveries
    assert [d.task_id for d in leased] == [a.id, b.id]
    results = app.broker.results
    done = Outcome("succeeded", clock.now_ms(), value=2)
    held = results.ack_many([results.prepare_ack("default", a.id, None, 0),
                             results.prepare_ack("default", b.id, done, 60_000)])
    assert held == [True, True]
    k = QueueKeys("test", "default")
    assert not redis_client.exists(k.result(a.id))
    assert redis_client.exists(k.result(b.id)) and b.get(timeout=0) == 2
    assert redis_client.hlen(k.messages) == 0 and redis_client.zcard(k.leases) == 0


def test_an_ack_of_a_lost_lease_clears_the_retried_task_from_delayed_and_order(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app, t = app_with_t(make_app)

    handle = t.delay(1)
    first = fetch(app, clock, lease_ms=1_000).deliveries[0]
    clock.advance(2)  # the first lease expires: the task is delivered again
    second = fetch(app, clock, lease_ms=30_000).deliveries[0]
    assert second.task_id == handle.id
    results = app.broker.results
    note = Outcome("retrying", clock.now_ms(), message="again")
    assert results.retry("default", second.message(), clock.now_ms() + 60_000, note)
    k = QueueKeys("test", "default")
    assert redis_client.zscore(k.delayed, handle.id) is not None
    assert redis_client.hexists(k.order, handle.id)
    # the first holder ends late: its outcome stands, and no trace is left behind
    assert results.ack("default", first.task_id, None, 0) is False
    assert redis_client.zscore(k.delayed, handle.id) is None
    assert not redis_client.hexists(k.order, handle.id)
    assert not redis_client.hexists(k.retrying, handle.id)
    assert redis_client.hlen(k.messages) == 0


def test_both_holders_of_a_redelivered_task_record_a_result_and_the_later_one_is_kept(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    """ack.lua pushes a kept result and trims to it when one was there already (the
    sixth pass, in place of a DEL first): the result key still holds one outcome."""
    app, t = app_with_t(make_app)

    handle = t.delay(1)
    first = fetch(app, clock, lease_ms=1_000).deliveries[0]
    clock.advance(2)  # the first lease expires: the task is delivered again
    second = fetch(app, clock, lease_ms=30_000).deliveries[0]
    assert second.task_id == first.task_id == handle.id
    results = app.broker.results
    early = Outcome("succeeded", clock.now_ms(), value="second holder")
    late = Outcome("succeeded", clock.now_ms(), value="first holder, late")
    assert results.ack("default", second.task_id, early, 60_000) is True
    assert results.ack("default", first.task_id, late, 120_000) is False
    k = QueueKeys("test", "default")
    assert redis_client.llen(k.result(handle.id)) == 1
    assert handle.get(timeout=0) == "first holder, late"
    assert 60_000 < redis_client.pttl(k.result(handle.id)) <= 120_000
    assert redis_client.hlen(k.messages) == 0 and redis_client.zcard(k.leases) == 0


def test_lease_scores_written_as_text_are_deadline_and_priority_on_either_clock(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app, t = app_with_t(make_app)

    handles = {p: t.apply_async((p,), priority=p) for p in (0, 5, 9, 1)}
    late = t.apply_in(0.5, 7)  # due before the fetch below: promoted, then leased
    clock.advance(1)
    leased = fetch(app, clock, count=5, lease_ms=12_345).deliveries
    assert [d.priority for d in leased] == [9, 5, 5, 1, 0]
    assert {d.task_id for d in leased} == {late.id, *(h.id for h in handles.values())}
    k = QueueKeys("test", "default")
    deadline = clock.now_ms() + 12_345
    for d in leased:
        assert redis_client.zscore(k.leases, d.task_id) == deadline * 10 + 9 - d.priority
    # the server's clock (a fetch behind a wait): the score is a number, as before
    other = t.apply_async((3,), priority=3)
    queues = app.broker.queues
    reply = app.broker.transport.run_calls(
        [queues.fetch_call("default", None, FetchTerms(12_345, 1, 5))], "fetch")[-1]
    [last] = queues.fetch_result(reply).deliveries
    assert last.task_id == other.id
    score = redis_client.zscore(k.leases, other.id)
    assert score == int(score) and score % 10 == 9 - 3
    # a result's expiry sent as text is the same expiry
    results = app.broker.results
    done = Outcome("succeeded", clock.now_ms(), value=1)
    assert results.ack_many([results.prepare_ack("default", leased[0].task_id, done,
                                                 90_000)]) == [True]
    assert 85_000 < redis_client.pttl(k.result(leased[0].task_id)) <= 90_000


def test_stale_entries_of_a_held_retried_dead_or_cancelled_task_are_dropped(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app, t = app_with_t(make_app)

    k = QueueKeys("test", "default")
    ready = k.ready[9 - 5]
    held, retried, dead, cancelled = (t.delay(n) for n in range(4))
    leased = fetch(app, clock, count=3).deliveries
    assert [d.task_id for d in leased] == [held.id, retried.id, dead.id]
    score = redis_client.zscore(k.leases, held.id)
    results = app.broker.results
    note = Outcome("retrying", clock.now_ms(), message="again")
    assert results.retry("default", leased[1].message(), clock.now_ms() + 60_000, note)
    assert results.bury("default", dead.id, outcome=Outcome("failed", clock.now_ms()),
                        result_ttl_ms=60_000)
    assert cancelled.cancel()
    # second entries of each (a lost lease's leftovers, a task enqueued again)
    redis_client.rpush(ready, held.id, retried.id, dead.id, cancelled.id)
    assert fetch(app, clock, count=4).deliveries == []
    assert redis_client.llen(ready) == 0
    assert redis_client.zscore(k.leases, held.id) == score  # the lease kept as it was
    assert redis_client.hget(k.deliveries, held.id) == b"1"
    assert redis_client.zscore(k.delayed, retried.id) is not None
    assert redis_client.zscore(k.dead, dead.id) is not None
    assert redis_client.zcard(k.leases) == 1


def test_runs_of_empty_ready_lists_are_skipped_in_priority_order(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app, t = app_with_t(make_app)

    k = QueueKeys("test", "default")
    for ps in ((0, 3, 7), (4,), (9, 2), (6,), (8, 5, 1)):
        for p in ps:
            t.apply_async((p,), priority=p)
        got = [fetch(app, clock).deliveries for _ in ps]
        assert [[d.priority for d in ds] for ds in got] == [[p] for p in sorted(ps)[::-1]]
        assert redis_client.exists(k.wake)  # tokens kept while a list may hold tasks
        assert fetch(app, clock).deliveries == []
        assert not redis_client.exists(k.wake)  # every list empty: stale tokens dropped
    # one fetch across the default priority's list, from above it and to below it
    for ps in ((6, 5), (5, 4), (7, 5, 0)):
        for p in ps:
            t.apply_async((p,), priority=p)
        fetched = fetch(app, clock, count=len(ps) + 1).deliveries
        assert [d.priority for d in fetched] == sorted(ps)[::-1]
    # a key of another type among the lists is passed over, as an empty one
    redis_client.set(k.ready[9 - 7], b"not a list")
    redis_client.set(k.ready[9 - 2], b"not a list")
    low, default = t.apply_async((0,), priority=0), t.delay(5)
    assert [d.task_id for d in fetch(app, clock, count=3).deliveries] == [default.id, low.id]
    assert redis_client.get(k.ready[9 - 7]) == b"not a list"


def test_ids_that_are_text_are_leased_and_others_dropped(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app, t = app_with_t(make_app)

    ids = ["order:17/a b", "t\u00e2che-\u4efb\u52a1", "~!@#$%^&*()", "x" * 200]
    for n, task_id in enumerate(ids):
        t.apply_async((n,), task_id=task_id)
    k = QueueKeys("test", "default")
    redis_client.rpush(k.ready[9 - 5], b"\xff\xfe", b"")  # no text, no id: dropped
    leased = fetch(app, clock, count=6).deliveries
    assert [d.task_id for d in leased] == ids
    assert redis_client.llen(k.ready[9 - 5]) == 0


def _ack_keys(app: Minitask, *leased: Delivery) -> int:
    """How many keys past the six fixed ones the ack of ``leased`` would pass."""
    results = app.broker.results
    groups = results._ack_groups([results.prepare_ack("default", d.task_id, None, 0,
                                                      flow=d.flow) for d in leased])
    [call] = results._ack_calls(groups)
    return call[4]


def test_an_ack_passes_flow_keys_only_for_tasks_leased_with_flow_control(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app = make_app()

    @app.task(name="plain")
    def plain(n: int) -> int:
        return n

    @app.task(name="solo", max_running=1)
    def solo(n: int) -> int:
        return n

    k = QueueKeys("test", "default")
    first = plain.delay(1)
    [d] = fetch(app, clock).deliveries
    assert d.task_id == first.id and d.flow is False
    assert _ack_keys(app, d) == 0
    # a limited task enqueued while the plain one is held: its spec is its own
    limited = solo.delay(2)
    assert app.broker.results.ack("default", first.id, None, 0)  # flow unknown: full path
    assert redis_client.hexists(k.flow, limited.id)
    # leased with flow control (the flow hash held a spec): the ack frees the slot
    again = plain.delay(3)
    leased = fetch(app, clock, count=2).deliveries
    assert [x.task_id for x in leased] == [limited.id, again.id]
    assert all(x.flow for x in leased)
    assert _ack_keys(app, *leased) == 4
    # one task leased with flow control among others: the group passes the flow keys
    assert _ack_keys(app, d, leased[1]) == 4
    assert app.broker.flow.limiter_state("default", "4:solo")["running"] == [limited.id]
    assert app.broker.results.ack_many(
        [app.broker.results.prepare_ack("default", x.task_id, None, 0, flow=x.flow)
         for x in leased]) == [True, True]
    assert app.broker.flow.limiter_state("default", "4:solo")["running"] == []
    assert redis_client.hlen(k.flow) == 0
    # the flow hash empty again: the next fetch's leases need no flow keys
    last = plain.delay(4)
    [d_last] = fetch(app, clock).deliveries
    assert d_last.task_id == last.id and d_last.flow is False
    assert _ack_keys(app, d_last) == 0
    assert app.broker.results.ack_many(
        [app.broker.results.prepare_ack("default", last.id, None, 0, flow=False)]) == [True]
    assert redis_client.hlen(k.messages) == 0 and redis_client.zcard(k.leases) == 0


def test_an_id_held_without_flow_control_gets_no_spec_while_its_lease_is_held(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    """What the flowless ack rests on: enqueue_flow writes no spec for a pending id."""
    app = make_app()

    @app.task(name="solo", max_running=1)
    def solo(n: int) -> int:
        return n

    @app.task(name="plain")
    def plain(n: int) -> int:
        return n

    held = plain.apply_async((1,), task_id="same")
    fetch(app, clock)
    again = solo.apply_async((2,), task_id="same")
    assert again.id == held.id
    k = QueueKeys("test", "default")
    assert redis_client.hlen(k.flow) == 0
    assert app.broker.results.ack("default", "same", None, 0)


def test_expired_leases_reclaimed_and_poisoned_in_one_fetch_and_a_mixed_ack(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    """The tables for reclaimed leases and lost acks are made only when needed."""
    app, t = app_with_t(make_app)

    k = QueueKeys("test", "default")
    worn, fresh = t.delay(1), t.delay(2)
    assert len(fetch(app, clock, count=2, lease_ms=1_000).deliveries) == 2
    redis_client.hset(k.deliveries, worn.id, 5)  # worn out: poisoned when it expires
    clock.advance(2)
    queues = app.broker.queues
    again = queues.fetch("default", now_ms=clock.now_ms(), lease_ms=30_000, count=5,
                         max_deliveries=5)
    assert again.poisoned == [worn.id]
    assert [d.task_id for d in again.deliveries] == [fresh.id]
    assert redis_client.zscore(k.leases, worn.id) is not None  # left for the caller
    # one ack call: a lease held (fresh) and one lost (worn, taken back by hand)
    redis_client.zrem(k.leases, worn.id)
    results = app.broker.results
    assert results.ack_many([results.prepare_ack("default", fresh.id, None, 0),
                             results.prepare_ack("default", worn.id, None, 0)]) == [True, False]
    assert redis_client.hlen(k.messages) == 0 and redis_client.zcard(k.leases) == 0
