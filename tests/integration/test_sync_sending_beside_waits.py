"""Blocking producers and handles on a real redis-server, many threads at once:
threads waiting for results (get(), a group's or a chord's get(), a broadcast's
join()) never take the connections sends need, any number of them get their
results, and a full pool waits for a free connection, then says it is exhausted.

The sync twin of test_async_sending_beside_waits.py (issue 29, part 3)."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterator, List

import pytest

from minitask import BrokerError, Minitask, chord, group
from tests.support.draining import drain
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

#: Bounds every wait of these tests; generous for a loaded 2-core machine.
DEADLINE = 120.0


@pytest.fixture
def app(redis_server: RedisServer) -> Iterator[Minitask]:
    client = redis_server.client()
    client.flushall()
    client.close()
    made = Minitask("syncwaits", broker=redis_server.url)
    yield made
    made.close()


def in_threads(calls: List[Callable[[], Any]]) -> Callable[[], Dict[int, Any]]:
    """Start a thread per call; the returned function joins them (within DEADLINE)
    and gives each call's value or exception, by its place in ``calls``."""
    outcomes: Dict[int, Any] = {}

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            outcomes[index] = call()
        except Exception as exc:  # noqa: BLE001 - a test reports every failure
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(index, call), daemon=True)
               for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()

    def joined() -> Dict[int, Any]:
        deadline = time.monotonic() + DEADLINE
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(thread.is_alive() for thread in threads), "threads never ended"
        return outcomes

    return joined


def failures(outcomes: Dict[int, Any]) -> List[str]:
    return [f"{type(value).__name__}: {value}" for value in outcomes.values()
            if isinstance(value, Exception)][:3]


def waiting_on(app: Minitask, queue: str, count: int, seconds: float = 30.0) -> None:
    """Block until ``count`` threads wait in Redis (or ``seconds`` pass): the waits
    hold their connections by then."""
    client = app.broker.client
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if int(client.info("clients")["blocked_clients"]) >= count:
            return
        time.sleep(0.05)


def test_50_sends_succeed_while_150_threads_wait_in_get(app: Minitask) -> None:
    """redis-py's pool holds 100 connections: the waits held them all, and every
    delay() of another thread failed with "Too many connections; is Redis running"."""

    @app.task
    def slow_one(n: int) -> int:
        return n

    @app.task(queue="elsewhere")
    def sent(n: int) -> int:
        return n

    awaited = [slow_one.delay(n) for n in range(150)]
    waits = in_threads([lambda handle=handle: handle.get(timeout=DEADLINE)
                        for handle in awaited])
    waiting_on(app, "default", 100)
    sends = in_threads([lambda n=n: sent.delay(n) for n in range(50)])()
    assert not failures(sends), failures(sends)
    assert app.broker.queues.counts("elsewhere")["ready"] == 50
    assert drain(app.worker(queues=["default"], burst=True)) == 150
    values = waits()
    assert not failures(values), failures(values)
    assert [values[index] for index in range(150)] == list(range(150))


def test_300_threads_waiting_for_one_result_all_get_it(app: Minitask) -> None:
    """Beyond the pool's 100 connections, waits failed: 300 threads, 200 failures
    ("could not read the state of ...: Too many connections")."""

    @app.task
    def answer() -> int:
        return 42

    handle = answer.delay()
    waits = in_threads([lambda: handle.get(timeout=DEADLINE) for _ in range(300)])
    waiting_on(app, "default", 100)
    assert drain(app.worker(queues=["default"], burst=True)) == 1
    values = waits()
    assert not failures(values), failures(values)
    assert list(values.values()) == [42] * 300


def test_group_chord_and_broadcast_waits_leave_sends_their_connections(
        app: Minitask) -> None:
    """Every blocking wait of the handles: a group's get(), a chord's get() and a
    broadcast's join(), 60 threads each, while 50 threads send."""

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def total(values: List[int]) -> int:
        return sum(values)

    @app.task(broadcast=True, queue="news")
    def hello() -> str:
        return "hi"

    @app.task(queue="elsewhere")
    def sent(n: int) -> int:
        return n

    app.worker(queues=["news"], subscriber="reader", burst=True).starting()
    groups = [group(add.s(n, 1), add.s(n, 2)).delay() for n in range(60)]
    chords = [chord([add.s(n, 0), add.s(n, 0)], total.s()).delay() for n in range(60)]
    calls = [hello.delay() for _ in range(60)]
    waits = in_threads([lambda each=each: each.get(timeout=DEADLINE) for each in groups]
                       + [lambda each=each: each.get(timeout=DEADLINE) for each in chords]
                       + [lambda each=each: each.join(timeout=DEADLINE) for each in calls])
    waiting_on(app, "default", 100)
    sends = in_threads([lambda n=n: sent.delay(n) for n in range(50)])()
    assert not failures(sends), failures(sends)
    drain(app.worker(queues=["default"], burst=True))
    app.worker(queues=["news"], subscriber="reader", burst=True).run()
    values = waits()
    assert not failures(values), failures(values)
    assert [values[index] for index in range(60)] == [[n + 1, n + 2] for n in range(60)]
    assert [values[60 + index] for index in range(60)] == [2 * n for n in range(60)]
    assert [values[120 + index] for index in range(60)] == [{"reader": "hi"}] * 60


def test_a_full_pool_makes_a_call_wait_for_a_free_connection(redis_server: RedisServer) -> None:
    """Three connections for 40 threads that read states and send: each call waits
    its turn instead of failing with "Too many connections"."""
    redis_server.client().flushall()
    app = Minitask("syncfull", broker=f"{redis_server.url}?max_connections=3")

    @app.task
    def noted(n: int) -> int:
        return n

    def sends_and_reads(n: int) -> str:
        handle = noted.delay(n)
        for _ in range(5):
            assert handle.status() == "queued"
        return handle.id

    try:
        outcomes = in_threads([lambda n=n: sends_and_reads(n) for n in range(40)])()
        assert not failures(outcomes), failures(outcomes)
        assert app.broker.queues.counts("default")["ready"] == 40
    finally:
        app.close()


def test_a_pool_that_stays_full_says_so_and_how_to_raise_its_size(
        redis_server: RedisServer) -> None:
    """Not "is Redis running and reachable?": the pool is exhausted, after the wait
    the URL's timeout= states."""
    redis_server.client().flushall()
    app = Minitask("syncexhausted", broker=f"{redis_server.url}?max_connections=1&timeout=0.3")

    @app.task
    def noted() -> None:
        return None

    handle = noted.delay()  # on the thread's own connection, outside the pool
    pool = app.broker.client.connection_pool
    taken = pool.get_connection()
    try:
        began = time.monotonic()
        with pytest.raises(BrokerError) as caught:
            handle.status()
        assert time.monotonic() - began >= 0.3  # it waited for one to come back
        message = str(caught.value)
        assert caught.value.reason == "pool exhausted", message
        assert "all 1 connections of the client's pool stayed in use for 0.3 s" in message
        assert "max_connections" in message and "is Redis running" not in message
    finally:
        pool.release(taken)
        app.close()
    assert handle.status() == "queued"  # a released connection serves calls again
    app.close()
