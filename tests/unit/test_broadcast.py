"""Broadcast tasks (guide/broadcast) driven in-process, on fakeredis and on the real server.

Workers of several subscriber names run in this thread one task at a time
(``drain``); time moves with the manual clock. What real processes and
signals prove is in tests/crash/test_broadcast_crash.py.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, Callable, Dict, List

import pytest
import redis

from minitask import (BroadcastHandle, ConfigurationError, Minitask, ResultTimeout,
                      Subscriber, TaskFailed, current_task)
from minitask.broker.keys import QueueKeys, lane
from minitask.testing import SUBSCRIBER, drain as drain_app, isolated
from minitask.worker import Worker
from tests.support.clock import ManualClock
from tests.support.draining import drain

QUEUE = "config"


class Fanout:
    """An app with broadcast tasks whose runs are recorded here, by subscriber."""

    def __init__(self, app: Minitask) -> None:
        self.app = app
        self.runs: List[Any] = []
        self.fail_first: Dict[str, int] = {}

        @app.task(broadcast=True, queue=QUEUE)
        def reload(version: int) -> int:
            context = current_task()
            assert context is not None
            self.runs.append((context.id, context.queue, version))
            return version * 10

        @app.task(broadcast=True, queue=QUEUE, retries=1, retry_backoff=0.0)
        def flaky(key: str) -> str:
            self.fail_first[key] = self.fail_first.get(key, 0) + 1
            if self.fail_first[key] == 1:
                raise ValueError(f"first run of {key} fails")
            return key

        @app.task(broadcast=True, queue=QUEUE)
        def broken() -> None:
            raise RuntimeError("always")

        @app.task
        def plain() -> str:
            return "plain"

        self.reload, self.flaky, self.broken, self.plain = reload, flaky, broken, plain

    def worker(self, name: str, **options: Any) -> Worker:
        worker = self.app.worker(queues=[QUEUE], subscriber=name, **options)
        worker.starting()
        return worker


@pytest.fixture
def fan(make_app: Callable[..., Minitask]) -> Fanout:
    return Fanout(make_app())


def test_each_subscriber_runs_a_call_once_and_join_gives_outcomes_by_name(fan: Fanout) -> None:
    a, b = fan.worker("a"), fan.worker("b")
    handle = fan.reload.delay(7)
    assert isinstance(handle, BroadcastHandle)
    assert handle.subscribers() == ["a", "b"]
    assert handle.status() == "queued"
    assert drain(a) == 1 and drain(a) == 0
    assert drain(b) == 1
    assert fan.runs == [(handle.id, QUEUE, 7), (handle.id, QUEUE, 7)]
    assert handle.join(timeout=1) == {"a": 70, "b": 70}
    assert handle.get(timeout=1) == {"a": 70, "b": 70}
    assert handle.status() == "succeeded"
    assert handle.join(timeout=1, subscribers=["b"]) == {"b": 70}
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 0  # pulled by all: deleted


def test_workers_sharing_a_name_share_one_subscription(fan: Fanout) -> None:
    first, second = fan.worker("a"), fan.worker("a")
    handles = [fan.reload.delay(n) for n in range(4)]
    assert first.run_once() and second.run_once() and first.run_once() and second.run_once()
    assert not first.run_once() and not second.run_once()
    assert [run[2] for run in fan.runs] == [0, 1, 2, 3]  # each once, in send order
    assert [h.join(timeout=1) for h in handles] == [{"a": n * 10} for n in range(4)]


def test_a_new_subscriber_starts_with_calls_sent_after_it_subscribed(fan: Fanout) -> None:
    a = fan.worker("a")
    before = fan.reload.delay(1)
    late = fan.worker("late")
    after = fan.reload.delay(2)
    assert drain(late) == 1
    assert [run[2] for run in fan.runs] == [2]
    assert before.subscribers() == ["a"] and after.subscribers() == ["a", "late"]
    assert drain(a) == 2
    assert after.join(timeout=1) == {"a": 20, "late": 20}


def test_a_call_with_no_subscriber_runs_nowhere_and_join_returns_at_once(fan: Fanout) -> None:
    handle = fan.reload.delay(1)
    assert handle.join(timeout=0) == {}
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 0


def test_a_subscribers_run_is_retried_and_dead_lettered_like_a_task(
        fan: Fanout, clock: ManualClock) -> None:
    a = fan.worker("a")
    flaky = fan.flaky.delay("k")
    broken = fan.broken.delay()
    drain(a)
    clock.advance(1)
    drain(a)
    assert flaky.join(timeout=1) == {"a": "k"}
    assert fan.fail_first == {"k": 2}
    outcome = broken.join(timeout=1)["a"]
    assert isinstance(outcome, TaskFailed) and outcome.exc_type == "RuntimeError"
    assert broken.status() == "failed"
    dead = fan.app.dead_letters()
    assert [(d.task_id, d.queue, d.exc_type) for d in dead] == [
        (broken.id, lane(QUEUE, "a"), "RuntimeError")]
    assert fan.app.requeue_dead(broken.id)  # back into a's lane, for a only
    assert drain(a) == 1


def test_join_timeout_names_who_has_not_finished(fan: Fanout) -> None:
    fan.worker("slow")
    a, z = fan.worker("a"), fan.worker("z")
    handle = fan.reload.delay(3)
    drain(a)
    drain(z)
    with pytest.raises(ResultTimeout) as raised:
        handle.join(timeout=0.05)
    text = str(raised.value)
    assert "on 1 subscriber(s): slow (last seen" in text and "1 call(s) behind" in text
    assert "z (" not in text and "a (" not in text
    with pytest.raises(ConfigurationError):
        handle.join(timeout=float("nan"))


def test_subscribers_lists_lag_and_last_seen(fan: Fanout) -> None:
    a, b = fan.worker("a"), fan.worker("b")
    for n in range(3):
        fan.reload.delay(n)
    drain(a)
    found = fan.app.subscribers(QUEUE)
    assert [(s.name, s.lag) for s in found] == [("a", 0), ("b", 3)]
    assert all(isinstance(s, Subscriber) and s.last_seen is not None for s in found)
    assert drain(b) == 3
    assert [s.lag for s in fan.app.subscribers(QUEUE)] == [0, 0]


def test_unsubscribe_deletes_what_only_the_gone_subscriber_had_not_pulled(fan: Fanout) -> None:
    a, _ = fan.worker("a"), fan.worker("gone")
    handles = [fan.reload.delay(n) for n in range(5)]
    drain(a)
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 5
    assert fan.app.unsubscribe(QUEUE, "gone")
    assert not fan.app.unsubscribe(QUEUE, "gone")
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 0
    assert handles[0].join(timeout=1) == {"a": 0}  # gone is not waited for any more
    assert fan.reload.delay(9).subscribers() == ["a"]
    with pytest.raises(ConfigurationError):
        fan.app.unsubscribe(QUEUE, "bad:name")


def test_maxlen_bounds_the_log_and_a_late_subscriber_skips_what_was_dropped(
        make_app: Callable[..., Minitask], caplog: pytest.LogCaptureFixture) -> None:
    fan = Fanout(make_app(broadcast_maxlen=3))
    a = fan.worker("a")
    for n in range(10):
        fan.reload.delay(n)
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 3
    with caplog.at_level(logging.WARNING, logger="minitask"):
        assert drain(a) == 3
    assert [run[2] for run in fan.runs] == [7, 8, 9]
    assert "subscriber 'a' missed 7 broadcast call(s)" in caplog.text


def test_calls_older_than_broadcast_ttl_are_dropped(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    fan = Fanout(make_app(broadcast_ttl=60))
    a = fan.worker("a")
    fan.reload.delay(1)
    clock.advance(61)
    fan.reload.delay(2)  # a send drops what is over the ttl
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 1
    assert drain(a) == 1 and [run[2] for run in fan.runs] == [2]


def test_every_key_of_a_broadcast_shares_its_queues_hash_tag(
        fan: Fanout, redis_client: "redis.Redis[bytes]") -> None:
    a, _ = fan.worker("a"), fan.worker("b")
    handle = fan.reload.delay(1)
    fan.broken.delay()
    drain(a)
    handle.join(timeout=1, subscribers=["a"])
    keys = [key.decode() for key in redis_client.keys("*")]
    broadcast_keys = [key for key in keys if "bcast:" in key or ":lane:" in key]
    assert broadcast_keys and all(key.startswith("minitask:{test:config}:")
                                  for key in broadcast_keys), keys
    assert QueueKeys("test", lane(QUEUE, "a")).ready[0] == "minitask:{test:config}:lane:a:ready:9"


def test_a_send_wakes_each_subscriber_and_idle_workers_wait_on_their_lane(
        fan: Fanout, redis_client: "redis.Redis[bytes]") -> None:
    a = fan.worker("a")
    fan.worker("b")
    fan.reload.delay(1)
    for name in ("a", "b"):
        assert redis_client.llen(QueueKeys("test", lane(QUEUE, name)).wake) == 1
    assert a._queues.wake_also == [lane(QUEUE, "a")]
    # a worker that serves no broadcast queue waits on nothing more
    assert fan.app.worker(queues=["default"], subscriber="a")._queues.wake_also == []


def test_bad_options_are_refused_before_anything_is_sent(
        fan: Fanout, make_app: Callable[..., Minitask]) -> None:
    with pytest.raises(ConfigurationError, match="broadcast must be True or False"):
        fan.app.task(broadcast="yes", name="x")(lambda: None)
    with pytest.raises(ConfigurationError, match="takes no delay or eta"):
        fan.reload.apply_in(5, 1)
    with pytest.raises(ConfigurationError, match="broadcast_maxlen"):
        make_app(broadcast_maxlen=0)
    with pytest.raises(ConfigurationError, match="broadcast_ttl"):
        make_app(broadcast_ttl=0)
    with pytest.raises(ConfigurationError, match="subscriber name"):
        fan.app.worker(subscriber="a:b")
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 0


def test_an_ordinary_task_on_a_broadcast_queue_runs_once(fan: Fanout) -> None:
    a, b = fan.worker("a"), fan.worker("b")
    handle = fan.plain.apply_async(queue=QUEUE)
    assert drain(a) + drain(b) == 1
    assert handle.get(timeout=1) == "plain"


def test_drain_runs_broadcast_calls_once_in_an_isolated_app() -> None:
    app = Minitask("isolated-broadcast")
    ran: List[int] = []

    @app.task(broadcast=True, queue=QUEUE)
    def reload(version: int) -> int:
        ran.append(version)
        return version

    with isolated(app):
        handle = reload.delay(5)
        assert drain_app(app) == 1
        assert ran == [5]
        assert handle.join(timeout=1) == {SUBSCRIBER: 5}


def test_async_send_and_ajoin(fan: Fanout, clock: ManualClock) -> None:
    a = fan.worker("a")

    async def scenario() -> Dict[str, Any]:
        try:
            handle = await fan.reload.adelay(4)
            assert isinstance(handle, BroadcastHandle)
            drain(a)
            assert await handle.astatus() == "succeeded"
            assert await handle.aprogress() is None and not await handle.acancel()
            assert await handle.aget(timeout=1) == {"a": 40}
            return await handle.ajoin(timeout=1)
        finally:
            await fan.app.aclose()

    assert asyncio.run(scenario()) == {"a": 40}


def test_ajoin_waits_on_the_async_client_and_holds_no_thread(
        fan: Fanout, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """While ``ajoin`` waits, the loop runs other work (the worker here, in the
    loop's thread). On the real server no thread runs the sync join; fakeredis has
    no async client, and there the join runs in the executor, as before."""
    a = fan.worker("a")
    if request.node.callspec.params["redis_client"] == "real":
        monkeypatch.setattr(BroadcastHandle, "join", None)  # no thread may run it

    async def scenario() -> Dict[str, Any]:
        try:
            handle = fan.reload.delay(6)
            waiting = asyncio.ensure_future(handle.ajoin(timeout=30))
            await asyncio.sleep(0.05)
            assert not waiting.done()
            drain(a)
            return await asyncio.wait_for(waiting, 60)
        finally:
            await fan.app.aclose()

    assert asyncio.run(scenario()) == {"a": 60}


def test_the_heartbeat_says_a_subscriber_is_alive(fan: Fanout, clock: ManualClock) -> None:
    a = fan.worker("a")
    clock.advance(100)
    a.beat()
    (found,) = fan.app.subscribers(QUEUE)
    assert found.last_seen is not None
    assert found.last_seen.timestamp() * 1000 == clock.now_ms()


def test_one_send_of_many_calls_leaves_no_more_than_maxlen(
        make_app: Callable[..., Minitask], redis_client: "redis.Redis[bytes]") -> None:
    """A send drops as many calls as it carries (not a batch of 1,000 at most): 2,500
    in one delay_many leave maxlen calls with a subscriber that never pulls."""
    fan = Fanout(make_app(broadcast_maxlen=10))
    fan.worker("gone")
    late = fan.reload.delay_many([(n,) for n in range(2500)])[-1]
    k = QueueKeys("test", QUEUE)
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 10
    assert redis_client.hlen(k.broadcast("bodies")) == 10
    assert redis_client.hlen(k.broadcast("sent")) == 10
    assert redis_client.exists(k.broadcast("names")) == 0  # a call keeps no names
    assert redis_client.zcard(k.broadcast("joins")) == 10
    assert late.subscribers() == ["gone"]


def test_join_says_at_once_when_a_subscriber_will_never_report(
        make_app: Callable[..., Minitask]) -> None:
    """A call dropped over maxlen before a subscriber pulled it, or a run that kept no
    result, can never be joined: ResultTimeout at once (join(None) waited for ever),
    while a call pulled and leased but not run yet is still waited for."""
    fan = Fanout(make_app(broadcast_maxlen=1))

    @fan.app.task(broadcast=True, queue=QUEUE, ignore_result=True)
    def quiet() -> None:
        return None

    a = fan.worker("a")
    dropped = fan.reload.delay(1)
    fan.reload.delay(2)  # over maxlen: the first leaves the log before a pulled it
    assert drain(a) == 1
    with pytest.raises(ResultTimeout, match="will never have an outcome on subscriber"
                                            r"\(s\) a: "):
        dropped.join(timeout=10)
    silent = quiet.delay()
    assert silent.status() == "queued"
    assert drain(a) == 1
    assert silent.status() == "unknown"  # it ran and kept nothing: not 'queued' for ever
    assert dropped.status() == "unknown"
    with pytest.raises(ResultTimeout, match="will never have an outcome"):
        silent.join(timeout=10)

    async def awaited() -> None:
        try:
            await silent.ajoin(timeout=10)
        finally:
            await fan.app.aclose()

    with pytest.raises(ResultTimeout, match="will never have an outcome"):
        asyncio.run(awaited())
    leased = fan.reload.delay(3)
    a._broadcasts._pull()  # in a's lane and leased, not run yet: a will report
    with pytest.raises(ResultTimeout, match="did not finish within 0.05 s"):
        leased.join(timeout=0.05)
    assert drain(a) == 1 and leased.join(timeout=1) == {"a": 30}


def test_a_subscriber_back_after_a_quiet_spell_skips_calls_over_the_ttl(
        make_app: Callable[..., Minitask], clock: ManualClock,
        caplog: pytest.LogCaptureFixture) -> None:
    """No send came after the calls: the returning subscriber's own pull drops
    what is older than broadcast_ttl (it ran them, however old, before)."""
    fan = Fanout(make_app(broadcast_ttl=60))
    fan.worker("a")
    fresh = fan.worker("fresh")
    old = fan.reload.delay(1)
    assert drain(fresh) == 1
    clock.advance(61)
    back = fan.worker("a")
    with caplog.at_level(logging.WARNING, logger="minitask"):
        assert drain(back) == 0
    assert "subscriber 'a' missed 1 broadcast call(s)" in caplog.text
    assert [run[2] for run in fan.runs] == [1]  # fresh's run only
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 0
    with pytest.raises(ResultTimeout, match="will never have an outcome on subscriber"):
        old.join(timeout=10)


def test_a_broadcast_task_is_refused_as_a_workflow_step(fan: Fanout) -> None:
    """A step is sent as a plain task (one subscriber would run it): refused, named."""
    with pytest.raises(ConfigurationError, match="task '.*reload' is a broadcast task"):
        fan.reload.s(1)
    with pytest.raises(ConfigurationError, match="cannot be a step of a chain"):
        fan.reload.si(1)
    assert fan.plain.s().task is fan.plain


def test_a_worker_not_given_a_name_subscribes_as_its_host(fan: Fanout) -> None:
    worker = fan.app.worker(queues=[QUEUE])
    worker.starting()
    assert worker.subscriber == socket.gethostname()
    assert [s.name for s in fan.app.subscribers(QUEUE)] == [socket.gethostname()]


def test_a_send_drops_every_call_over_the_ttl_page_by_page(
        make_app: Callable[..., Minitask], clock: ManualClock) -> None:
    """250 calls past the ttl are dropped by the next send, a hundred read at a time."""
    fan = Fanout(make_app(broadcast_ttl=60))
    a = fan.worker("a")
    fan.reload.delay_many([(n,) for n in range(250)])
    clock.advance(61)
    fan.reload.delay(999)
    assert fan.app.broker.broadcasts.log_size(QUEUE) == 1
    assert drain(a) == 1 and [run[2] for run in fan.runs] == [999]


def test_a_stopping_worker_gives_its_prefetched_calls_back_to_its_name(
        fan: Fanout, redis_client: "redis.Redis[bytes]") -> None:
    """Calls pulled and leased but not started go back to the head of the lane, for
    the next worker of the same name, in order; nothing runs twice."""
    first = fan.worker("a", prefetch=4)
    fan.worker("b")
    for n in range(6):
        fan.reload.delay(n)
    assert first.run_once()
    own = QueueKeys("test", lane(QUEUE, "a"))
    assert redis_client.zcard(own.leases) == 3  # prefetched, waiting
    first._leases.release_all()
    assert redis_client.zcard(own.leases) == 0
    assert drain(fan.worker("a")) == 5
    assert [run[2] for run in fan.runs] == [0, 1, 2, 3, 4, 5]
