"""Flow control in the scripts (guide/flow-control), driven with a manual clock.

Every test runs on fakeredis and on the suite's own redis-server (``redis_client``):
rate limits and max_running held at fetch, parked tasks never blocking others,
slots freed by every outcome and by lease reclaim, debounce, expiry, and no spec
or limiter state left behind.
"""
from __future__ import annotations

import bisect
import time
from types import SimpleNamespace
from typing import Any, Callable, List, Tuple

import fakeredis
import fakeredis._socket._base as fakeredis_base
import pytest

from minitask import Minitask, TaskFailed
from minitask.admin import purge_ready, queue_counts
from minitask.broker.keys import QueueKeys
from minitask.wire.message import Outcome
from minitask.stores.queue import FetchResult
from tests.support.clock import ManualClock
from tests.support.draining import drain


def fetch(app: Minitask, clock: ManualClock, count: int = 1,
          lease_ms: int = 30_000) -> FetchResult:
    return app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=lease_ms,
                                   count=count, max_deliveries=5)


def names(app: Minitask, result: FetchResult) -> List[str]:
    return [d.message().task.rsplit(".", 1)[-1] for d in result.deliveries]


def max_in_window(times_ms: List[int], window_ms: int) -> int:
    ordered = sorted(times_ms)
    return max(bisect.bisect_left(ordered, t + window_ms) - i for i, t in enumerate(ordered))


def stand_fakeredis_clock(redis_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """On fakeredis, stop its clock as the manual one stands. fakeredis expires keys on
    the real clock, which runs on while the manual one stands: a pace (kept a second
    past its turn) expired when a loaded machine (three pytest processes on two cores)
    spent a second over a few fetches (fakeredis runs the Lua in Python), and the next
    fetch started early (627, then 618 in a window at 600/s; 6 in a second at 5/s)."""
    if isinstance(redis_client, fakeredis.FakeRedis):
        frozen = time.time()
        monkeypatch.setattr(fakeredis_base, "time", SimpleNamespace(time=lambda: frozen))


def test_a_rate_limited_task_is_parked_and_tasks_behind_it_still_run(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(rate_limit="5/s", name="limited")
    def limited(n: int) -> int:
        return n

    @app.task(name="free")
    def free(n: int) -> int:
        return n

    limited.delay_many([(n,) for n in range(10)])
    free.delay_many([(n,) for n in range(3)])
    first = fetch(app, clock, count=10)
    # one limited start (the pace is one per 200 ms), then every free task behind
    assert names(app, first) == ["limited", "free", "free", "free"]
    assert first.next_event_ms is not None and first.next_event_ms > clock.now_ms()
    state = app.broker.flow.limiter_state("default", "7:limited")
    assert state["parked"] == 9
    assert fetch(app, clock).deliveries == []  # the limit holds: nothing handed out


def test_a_rate_limit_allows_at_most_n_starts_in_any_window_and_keeps_the_pace(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    stand_fakeredis_clock(redis_client, monkeypatch)  # 20 run_once calls a pace
    app = make_app()
    ran: List[int] = []

    @app.task(rate_limit="5/s")
    def limited(n: int) -> None:
        ran.append(clock.now_ms())

    limited.delay_many([(n,) for n in range(40)])
    worker = app.worker()
    start = clock.now_ms()
    for _ in range(2000):  # 10 ms steps: a worker that looks every 10 ms at worst
        worker.run_once()
        clock.advance(0.01)
        if len(ran) == 40:
            break
    assert len(ran) == 40
    assert max_in_window(ran, 1000) <= 5
    # a steady backlog runs at the limit: 39 paces of 200 ms, within 5 %
    assert 39 * 200 * 0.95 <= ran[-1] - start <= 39 * 200 * 1.05


def test_a_worker_waking_late_keeps_the_rate_of_a_steady_backlog(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    stand_fakeredis_clock(redis_client, monkeypatch)
    app = make_app()

    @app.task(rate_limit="5/s", name="limited")
    def limited(n: int) -> int:
        return n

    limited.delay_many([(n,) for n in range(40)])
    started: List[int] = []
    while len(started) < 40:
        result = fetch(app, clock)
        if result.deliveries:
            started.append(clock.now_ms())
            continue
        assert result.next_event_ms is not None and len(started) < 40
        clock.ms = result.next_event_ms + 30  # every wake-up 30 ms late (a busy machine)
    assert max_in_window(started, 1000) <= 5
    # late wake-ups do not add up, window after window: 39 paces of 200 ms within 5 %
    assert started[-1] - started[0] <= 39 * 200 * 1.05


def test_per_key_limits_are_separate(make_app: Callable[..., Minitask],
                                     clock: ManualClock) -> None:
    app = make_app()

    @app.task(rate_limit="1/s", name="call_api")
    def call_api(n: int) -> int:
        return n

    for key in ("a", "b", "a", "b"):
        call_api.apply_async((1,), limit_key=key)
    result = fetch(app, clock, count=10)
    assert len(result.deliveries) == 2  # one per key
    assert app.broker.flow.limiter_state("default", "8:call_api:a")["parked"] == 1
    assert app.broker.flow.limiter_state("default", "8:call_api:b")["parked"] == 1


def test_max_running_holds_and_each_outcome_frees_a_slot(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(max_running=2, name="heavy", retries=1)
    def heavy(n: int) -> int:
        return n

    @app.task(name="other")
    def other(n: int) -> int:
        return n

    handles = heavy.delay_many([(n,) for n in range(5)])
    other.delay(0)
    first = fetch(app, clock, count=10)
    assert names(app, first) == ["heavy", "heavy", "other"]
    assert fetch(app, clock, count=10).deliveries == []
    state = app.broker.flow.limiter_state("default", "5:heavy")
    assert state["parked"] == 3 and len(state["running"]) == 2
    # an ack frees a slot: the next parked task is handed out
    results = app.broker.results
    assert results.ack("default", handles[0].id, None, 0)
    assert [d.task_id for d in fetch(app, clock).deliveries] == [handles[2].id]
    # a release (graceful stop) frees one too
    assert app.broker.queues.release("default", [(handles[1].id, 5)]) == 1
    assert [d.task_id for d in fetch(app, clock).deliveries] == [handles[3].id]
    # a lease that expires (a dead worker) frees its slot when it is reclaimed
    clock.advance(31)
    again = fetch(app, clock, count=10)
    assert sorted(names(app, again)) == ["heavy", "heavy", "other"]  # other: its lease too
    assert len(app.broker.flow.limiter_state("default", "5:heavy")["running"]) == 2


def test_a_dead_workers_slot_is_freed_with_its_lease(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(max_running=1, name="solo")
    def solo(n: int) -> int:
        return n

    first, second = solo.delay_many([(1,), (2,)])
    assert [d.task_id for d in fetch(app, clock, lease_ms=2000).deliveries] == [first.id]
    assert fetch(app, clock).deliveries == []
    clock.advance(2.5)  # the holder's lease expired: reclaimed, its slot freed
    leased = fetch(app, clock, count=10)
    assert {d.task_id for d in leased.deliveries} == {second.id}
    # the reclaimed task waits for the slot the second now holds
    state = app.broker.flow.limiter_state("default", "4:solo")
    assert state["running"] == [second.id] and state["parked"] == 1


def test_workers_drain_a_limited_queue_and_leave_no_flow_state(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app = make_app()

    @app.task(max_running=1, rate_limit="100/s", name="both")
    def both(n: int) -> int:
        return n

    handles = [both.apply_async((n,), limit_key=f"k{n % 3}") for n in range(12)]
    worker = app.worker()
    for _ in range(500):
        drain(worker)
        clock.advance(0.01)
        if all(h.status() == "succeeded" for h in handles):
            break
    assert [h.get(timeout=1) for h in handles] == list(range(12))
    k = QueueKeys("test", "default")
    assert redis_client.hlen(k.flow) == 0
    assert redis_client.zcard(k.flow_due) == 0
    leftovers = [key for key in redis_client.keys(k.flow_prefix + "*")
                 if not key.endswith(b":starts")]  # starts expire by themselves
    assert leftovers == []


def test_debounce_replaces_a_scheduled_calls_arguments_and_due_time(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()
    ran: List[Tuple[int, int]] = []

    @app.task
    def send(value: int) -> None:
        ran.append((value, clock.now_ms()))

    start = clock.now_ms()
    worker = app.worker()
    for value in range(50):  # 50 calls in one second
        handle = send.apply_async((value,), task_id="digest-1", debounce=0.5)
        assert handle.status() == "scheduled"
        assert drain(worker) == 0
        clock.advance(0.02)
    last_call = start + 49 * 20
    clock.ms = last_call + 499
    assert drain(worker) == 0
    clock.ms = last_call + 500
    assert drain(worker) == 1
    assert ran == [(49, last_call + 500)]


def test_debounce_leaves_a_call_that_is_queued_already(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task
    def send(value: int) -> None:
        ran.append(value)

    send.apply_async((1,), task_id="d", debounce=0.1)
    clock.advance(0.2)
    assert app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=1000, count=0,
                                   max_deliveries=5).deliveries == []  # promoted, not leased
    send.apply_async((2,), task_id="d", debounce=0.1)  # queued: left as it is
    assert drain(app.worker()) == 1
    assert ran == [1]


def test_an_expired_task_ends_cancelled_with_exc_type_expired(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app = make_app()
    ran: List[int] = []

    @app.task
    def job(n: int) -> None:
        ran.append(n)

    late = job.apply_async((1,), expires=1)
    on_time = job.apply_async((2,), expires=10)
    clock.advance(2)
    assert drain(app.worker()) == 1
    assert ran == [2]
    assert late.status() == "cancelled"
    with pytest.raises(TaskFailed) as failed:
        late.get(timeout=1)
    assert failed.value.exc_type == "Expired"
    assert on_time.status() == "succeeded"
    assert redis_client.hlen(QueueKeys("test", "default").flow) == 0


def test_an_expired_task_keeps_its_result_for_the_task_s_own_result_ttl(
        make_app: Callable[..., Minitask], clock: ManualClock,
        redis_client: Any) -> None:
    app = make_app()  # the app keeps results a day; this task, 100 s

    @app.task(result_ttl=100)
    def short(n: int) -> None:
        pass

    @app.task
    def plain(n: int) -> None:
        pass

    late = short.apply_async((1,), expires=1)
    late_plain = plain.apply_async((2,), expires=1)
    clock.advance(2)
    assert drain(app.worker()) == 0
    assert late.status() == "cancelled" and late_plain.status() == "cancelled"
    keys = QueueKeys("test", "default")
    assert 0 < redis_client.pttl(keys.result(late.id)) <= 100_000
    assert redis_client.pttl(keys.result(late_plain.id)) > 100_000


def test_a_parked_task_that_expires_is_reported_when_its_turn_comes(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(max_running=1, name="one")
    def one(n: int) -> int:
        return n

    first = one.apply_async((1,))
    second = one.apply_async((2,), expires=1)
    assert [d.task_id for d in fetch(app, clock).deliveries] == [first.id]
    assert fetch(app, clock).deliveries == []  # second parked
    clock.advance(2)
    app.broker.results.ack("default", first.id, None, 0)
    result = fetch(app, clock)
    assert result.deliveries == [] and result.expired == [(second.id, 5)]


def test_cancelling_a_parked_task_drops_it(make_app: Callable[..., Minitask],
                                           clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(max_running=1, name="one")
    def one(n: int) -> int:
        return n

    first, second, third = one.delay_many([(1,), (2,), (3,)])
    fetch(app, clock)
    assert fetch(app, clock).deliveries == []
    assert second.cancel()
    app.broker.results.ack("default", first.id, None, 0)
    assert [d.task_id for d in fetch(app, clock, count=5).deliveries] == [third.id]
    assert redis_client.hkeys(QueueKeys("test", "default").flow) == [third.id.encode()]


def test_a_high_rate_starts_many_tasks_in_one_millisecond(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    app = make_app()

    @app.task(rate_limit="100000/s", max_running=1000, name="fast")
    def fast(n: int) -> int:
        return n

    fast.delay_many([(n,) for n in range(50)])
    assert len(fetch(app, clock, count=50).deliveries) == 50  # the clock never moved


def test_parked_tasks_count_as_ready_and_purge_deletes_them(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(rate_limit="5/s", name="limited")
    def limited(n: int) -> int:
        return n

    @app.task(max_running=1, name="slots")
    def slots(n: int) -> int:
        return n

    limited.delay_many([(n,) for n in range(10)])
    for tenant in ("a", "b"):
        slots.apply_async((1,), limit_key=tenant)
        slots.apply_async((2,), limit_key=tenant)
    first = fetch(app, clock, count=20)  # one of each limiter starts, the rest is parked
    assert sorted(names(app, first)) == ["limited", "slots", "slots"]
    counts = queue_counts(app, "default")
    assert counts["ready"] == 11 and counts["parked"] == 11
    assert counts["running"] == 3
    assert purge_ready(app, "default") == 11
    keys = QueueKeys("test", "default")
    assert queue_counts(app, "default")["ready"] == 0
    assert "parked" not in queue_counts(app, "default")
    # the running ones stay, with their specs; nothing of the purged ones is left
    running = {d.task_id for d in first.deliveries}
    assert {k.decode() for k in redis_client.hkeys(keys.messages)} == running
    assert {k.decode() for k in redis_client.hkeys(keys.flow)} == running
    for limiter in ("7:limited", "5:slots:a", "5:slots:b"):
        assert app.broker.flow.limiter_state("default", limiter)["parked"] == 0
    # the limits still hold for what comes next, and nothing purged comes back
    for delivery in first.deliveries:
        app.broker.results.ack("default", delivery.task_id, None, 0)
    assert redis_client.hlen(keys.flow) == 0
    after = limited.delay(99)
    clock.advance(1)
    assert drain(app.worker()) == 1
    assert after.get(timeout=1) == 99
    assert purge_ready(app, "default") == 0
    assert not redis_client.exists(keys.flow_limiters)


def test_a_status_without_flow_control_has_no_parked_count(
        make_app: Callable[..., Minitask]) -> None:
    app = make_app()

    @app.task
    def job(n: int) -> int:
        return n

    job.delay(1)
    assert queue_counts(app, "default") == app.broker.queues.counts("default")


def test_a_dead_letter_put_back_keeps_its_limits_and_limit_key(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(max_running=1, name="slots")
    def slots(n: int) -> int:
        return n

    doomed = slots.apply_async((1,), limit_key="a", expires=5)
    first = fetch(app, clock)
    assert [d.task_id for d in first.deliveries] == [doomed.id]
    died = Outcome("failed", clock.now_ms(), exc_type="Boom", reason="failed")
    assert app.broker.results.bury("default", doomed.id, outcome=died, result_ttl_ms=60_000)
    keys = QueueKeys("test", "default")
    assert redis_client.hlen(keys.flow) == 0  # no flow work for fetches while it is dead
    assert app.broker.flow.limiter_state("default", "5:slots:a")["running"] == []
    # another call of the same limiter takes the one slot
    holder = slots.apply_async((2,), limit_key="a")
    assert [d.task_id for d in fetch(app, clock).deliveries] == [holder.id]
    clock.advance(10)  # past the dead call's expiry: put back, it must run, not expire
    assert app.requeue_dead(doomed.id)
    assert redis_client.hlen(keys.flow_dead) == 0
    spec = redis_client.hget(keys.flow, doomed.id)
    assert spec == b"5:slots:a\n0\n0\n1\n0\n0"
    assert fetch(app, clock).deliveries == []  # its limit holds: parked behind the holder
    assert queue_counts(app, "default")["parked"] == 1
    app.broker.results.ack("default", holder.id, None, 0)  # the slot frees
    again = fetch(app, clock)
    assert [d.task_id for d in again.deliveries] == [doomed.id]
    assert again.expired == []


def test_purging_a_dead_letter_drops_its_kept_spec(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(rate_limit="5/s", name="limited")
    def limited(n: int) -> int:
        return n

    doomed = limited.delay(1)
    assert fetch(app, clock).deliveries
    died = Outcome("failed", clock.now_ms(), exc_type="Boom", reason="failed")
    assert app.broker.results.bury("default", doomed.id, outcome=died, result_ttl_ms=60_000)
    keys = QueueKeys("test", "default")
    assert redis_client.hexists(keys.flow_dead, doomed.id)
    assert app.purge_dead(doomed.id) == 1
    assert redis_client.hlen(keys.flow_dead) == 0


def test_a_running_task_stopped_on_request_frees_its_slot_and_drops_its_spec(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any) -> None:
    app = make_app()

    @app.task(max_running=1, name="one")
    def one(n: int) -> int:
        return n

    first, second = one.delay_many([(1,), (2,)])
    assert [d.task_id for d in fetch(app, clock).deliveries] == [first.id]
    assert fetch(app, clock).deliveries == []  # parked: waiting for the one slot
    stopped = Outcome("cancelled", clock.now_ms(), exc_type="Cancelled", reason="cancelled")
    assert app.broker.cancels.end("default", first.id, stopped, 60_000)
    # the stop frees the slot and re-arms the limiter, as any other outcome does
    assert [d.task_id for d in fetch(app, clock).deliveries] == [second.id]
    keys = QueueKeys("test", "default")
    assert redis_client.hkeys(keys.flow) == [second.id.encode()]
    assert app.broker.flow.limiter_state("default", "3:one")["running"] == [second.id]


def test_a_rate_of_500_or_more_a_window_is_paced_alone_and_keeps_its_bound(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    stand_fakeredis_clock(redis_client, monkeypatch)
    app = make_app()

    @app.task(rate_limit="600/s", name="fast")
    def fast(n: int) -> int:
        return n

    fast.delay_many([(n,) for n in range(2500)])
    starts: List[int] = []
    for _ in range(600):  # 3 s of a backlog, fetched every 5 ms
        starts += [clock.now_ms()] * len(fetch(app, clock, count=20).deliveries)
        clock.advance(0.005)
    # at most 600 starts in any closed window of the second and its guard (40 ms)
    assert max_in_window(starts, 1041) == 600
    # (600 - 1) starts per second, guard and half a guard: 565/s, and the first burst
    assert 1690 <= len(starts) <= 1720
    k = QueueKeys("test", "default")
    assert redis_client.keys(k.flow_prefix + "*:starts") == []  # no log of starts kept
    assert len(redis_client.keys(k.flow_prefix + "*:pace")) == 1


@pytest.mark.parametrize("most", [1, 2])
def test_a_second_entry_of_a_running_limited_task_keeps_its_spec_and_its_slot_frees(
        make_app: Callable[..., Minitask], clock: ManualClock, redis_client: Any,
        most: int) -> None:
    app = make_app()

    @app.task(max_running=most, name="solo")
    def solo(n: int) -> int:
        return n

    first, second = solo.delay(1), solo.delay(2)
    assert [d.task_id for d in fetch(app, clock).deliveries] == [first.id]
    k = QueueKeys("test", "default")
    redis_client.lpush(k.ready[9 - 5], first.id)  # a stale second entry, ahead of `second`
    # max_running=1, the slot held: both parked, in order (the stale one goes once its
    # message has); 2, a slot free: admitted, told by the lease's ZADD NX and dropped
    assert [d.task_id for d in fetch(app, clock, count=5).deliveries] == (
        [] if most == 1 else [second.id])
    assert redis_client.hexists(k.flow, first.id)  # the running task keeps its spec
    app.broker.results.ack("default", first.id, None, 0)  # so its outcome frees the slot
    if most == 1:
        assert [d.task_id for d in fetch(app, clock).deliveries] == [second.id]
    app.broker.results.ack("default", second.id, None, 0)
    assert app.broker.flow.limiter_state("default", "4:solo")["running"] == []
    assert redis_client.hlen(k.flow) == 0
