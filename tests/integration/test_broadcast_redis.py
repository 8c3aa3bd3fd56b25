"""Broadcast tasks against the suite's real redis-server: bounded memory with a
subscriber gone for good, time limits of a subscriber's run, and the commands
(``minitask status``, ``minitask unsubscribe``)."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, Dict, List

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from minitask import Minitask, TaskFailed
from minitask.cli.main import main
from minitask.broker.keys import QueueKeys, lane
from tests.apps.broadcast import QUEUE, producer
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


def test_a_subscriber_gone_for_good_cannot_make_redis_grow(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """broadcast_maxlen=1000: after 10,000 calls with a subscriber that never returns
    (and a live one running them all), the log and Redis's memory stay bounded."""
    app = Minitask("bounded", broker=redis_server.client(), broadcast_maxlen=1000)

    @app.task(broadcast=True, queue=QUEUE, ignore_result=True)
    def tick(n: int) -> None:
        return None

    store = app.broker.broadcasts
    assert store.subscribe(QUEUE, "gone", int(time.time() * 1000))
    memory: List[int] = []
    try:
        for chunk in range(10):
            tick.delay_many([(n,) for n in range(chunk * 1000, chunk * 1000 + 1000)])
            live = app.worker(queues=[QUEUE], burst=True, subscriber="live", prefetch=100)
            live.run()
            memory.append(int(admin.info("memory")["used_memory"]))
        k = QueueKeys("bounded", QUEUE)
        assert store.log_size(QUEUE) == 1000
        assert admin.hlen(k.broadcast("bodies")) == 1000
        assert admin.hlen(k.broadcast("sent")) == 1000
        assert admin.exists(k.broadcast("names")) == 0  # a call keeps no names
        assert admin.zcard(k.broadcast("joins")) <= 1000
        assert {s.name: s.lag for s in app.subscribers(QUEUE)} == {"gone": 10_000, "live": 0}
        assert admin.dbsize() < 30, admin.keys("*")  # no key per call is left
        # memory after 10,000 calls is about what it was after 2,000: bounded by maxlen
        assert memory[-1] < memory[1] * 1.25 + 1_000_000, memory
    finally:
        app.close()


def test_a_subscribers_run_has_its_time_limit(redis_server: RedisServer,
                                              admin: "redis.Redis[bytes]") -> None:
    app = Minitask("limited", broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE, timeout=0.05)
    def slow() -> str:
        time.sleep(0.3)
        return "late"

    try:
        app.worker(queues=[QUEUE], subscriber="a", burst=True).starting()
        handle = slow.delay()
        app.worker(queues=[QUEUE], subscriber="a", burst=True).run()
        outcome = handle.join(timeout=10)["a"]
        assert isinstance(outcome, TaskFailed) and outcome.exc_type == "TimeLimitExceeded"
    finally:
        app.close()


def test_status_lists_subscribers_with_their_lag_and_unsubscribe_removes_one(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    app, note, _ = producer(redis_server.client())
    try:
        app.broker.broadcasts.subscribe(QUEUE, "gone", int(time.time() * 1000))
        app.broker.broadcasts.subscribe(QUEUE, "here", int(time.time() * 1000))
        for n in range(3):
            note.delay(n)
        assert main(["worker", "-A", "tests.apps.broadcast", "--pool", "thread", "--burst",
                     "--name", "here", "-Q", QUEUE]) == 0
        capsys.readouterr()
        assert main(["status", "-A", "tests.apps.broadcast", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        lags = {row["name"]: row["lag"] for row in report["subscribers"][QUEUE]}
        assert lags == {"gone": 3, "here": 0}
        assert main(["status", "-A", "tests.apps.broadcast"]) == 0
        assert "broadcast subscribers of queue fan" in capsys.readouterr().out
        assert main(["unsubscribe", "-A", "tests.apps.broadcast", QUEUE, "gone"]) == 0
        assert main(["unsubscribe", "-A", "tests.apps.broadcast", QUEUE, "gone"]) == 1
        assert [s.name for s in app.subscribers(QUEUE)] == ["here"]
        assert app.broker.broadcasts.log_size(QUEUE) == 0
    finally:
        app.close()


def test_the_first_pull_after_a_script_flush_still_hands_the_call_out(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """The pull, the lane's fetch and the second pull go in one write: when Redis must
    load the pull's script first (NOSCRIPT), the fetch has already run by then, and
    the worker looks again at once rather than leaving the call for later."""
    app = Minitask("flushed", broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def hello() -> str:
        return "hi"

    try:
        worker = app.worker(queues=[QUEUE], subscriber="a")
        worker.starting()
        admin.script_flush()
        assert not app.worker(queues=["default"]).run_once()  # loads fetch.lua alone
        handle = hello.delay()
        assert worker.run_once()
        assert handle.join(timeout=5) == {"a": "hi"}
    finally:
        app.close()


@pytest.mark.parametrize("flushed", [False, True])
def test_an_idle_wait_woken_by_a_send_leases_the_call_in_its_own_round_trip(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", flushed: bool) -> None:
    """The pull and the lane's fetch ride behind the idle worker's BLPOP: when the
    send's wake token ends the wait, the call is already leased and held, with no
    pull of its own after the wake-up (one round trip, as for a task). With the
    scripts flushed, each is loaded and run again in the order sent."""
    app = Minitask("onetrip", broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def hello() -> str:
        return "hi"

    try:
        worker = app.worker(queues=[QUEUE], subscriber="a")
        worker.starting()
        source = worker._broadcasts
        assert source.next_job() is None  # idle: nothing sent yet
        if flushed:
            admin.script_flush()
        sender = threading.Timer(0.2, hello.delay)
        sender.start()
        job = None
        deadline = time.monotonic() + 30
        while job is None and time.monotonic() < deadline:
            source.wait()  # ends at the send's wake-up (or Redis's 5 s cap)
            job = worker._holdings.next_buffered(worker._stop.event)  # no pull here
        sender.join()
        assert job is not None and job.queue == lane(QUEUE, "a")
        leased = redis_server.client().zrange(QueueKeys("onetrip", lane(QUEUE, "a")).leases,
                                              0, -1)
        assert [job.task_id.encode()] == leased
    finally:
        app.close()


def test_a_send_of_more_calls_than_lua_can_unpack_drops_them_in_thousands(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """Lua's unpack fails past about 8,000 values: a send of 12,000 calls over
    broadcast_maxlen=10 drops 11,990 of them in pieces, and keeps 10."""
    app = Minitask("huge", broker=redis_server.client(), broadcast_maxlen=10)

    @app.task(broadcast=True, queue=QUEUE, ignore_result=True)
    def tick(n: int) -> None:
        return None

    try:
        app.broker.broadcasts.subscribe(QUEUE, "gone", int(time.time() * 1000))
        tick.delay_many([(n,) for n in range(12_000)])
        k = QueueKeys("huge", QUEUE)
        assert app.broker.broadcasts.log_size(QUEUE) == 10
        assert [admin.hlen(k.broadcast(part)) for part in ("bodies", "sent")] == [10] * 2
        assert admin.zcard(k.broadcast("joins")) == 10
    finally:
        app.close()


def test_a_subscribers_coroutine_runs_on_the_asyncio_pool(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """Lane jobs are jobs: a coroutine broadcast task runs on the asyncio pool, once
    per subscriber. (The process pool: tests/crash/test_broadcast_crash.py.)"""
    app = Minitask("pools", broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE, name="pools.twice")
    async def twice(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    try:
        workers = [app.worker(queues=[QUEUE], subscriber=name, pool="asyncio", concurrency=1)
                   for name in ("a", "b")]
        for worker in workers:
            worker.starting()
        handles = [twice.delay(n) for n in range(5)]
        threads = [threading.Thread(target=worker.run) for worker in workers]
        for thread in threads:
            thread.start()
        try:
            found = [h.join(timeout=60) for h in handles]
        finally:
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(timeout=60)
        assert found == [{"a": 2 * n, "b": 2 * n} for n in range(5)]
    finally:
        app.close()


def test_join_outwaits_a_given_clients_short_socket_timeout(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """redis-py 8 gives clients a 5 s socket timeout: a 5 s blocking read on one
    timed out (and was retried for a minute, then failed). join() and ajoin()
    block for less than the client's socket timeout, and go on waiting."""
    client = redis_server.client(socket_timeout=1.0, retry=Retry(NoBackoff(), 0))
    app = Minitask("patient", broker=client)

    @app.task(broadcast=True, queue=QUEUE)
    def hello() -> str:
        return "hi"

    worker = app.worker(queues=[QUEUE], subscriber="a", burst=True)
    worker.starting()
    first, second = hello.delay(), hello.delay()
    later = threading.Timer(2.5, app.worker(queues=[QUEUE], subscriber="a", burst=True).run)
    later.start()
    try:
        assert first.join(timeout=60) == {"a": "hi"}  # waits 2.5 s and more, on 1 s reads

        async def awaited() -> Dict[str, Any]:
            try:
                third = hello.delay()
                runner = threading.Timer(2.5, app.worker(queues=[QUEUE], subscriber="a",
                                                         burst=True).run)
                runner.start()
                try:
                    return await third.ajoin(timeout=60)
                finally:
                    runner.join(timeout=60)
            finally:
                await app.aclose()

        assert asyncio.run(awaited()) == {"a": "hi"}
        assert second.join(timeout=1) == {"a": "hi"}
    finally:
        later.join(timeout=60)
        app.close()
