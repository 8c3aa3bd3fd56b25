"""Result waits queued for a waiting connection sleep until something concerns them
(``_Turns``), a full pool's caller sleeps until a release, and ``get()``'s message
reads where the task is within ``LOOK_GRACE`` s (CI of 2026-12-01: 600 threads whose
4 s waits ran out together raised after 12 s, their messages' reads queued behind
each other on a 4-connection pool whose callers woke every 50 ms). fakeredis stands
in for the server; the 600-thread run on a real one is
tests/integration/test_queued_get_waits_glance.py."""
from __future__ import annotations

import math
import threading
import time
from typing import Any, List

import fakeredis
import pytest
import redis

from minitask import Minitask, ResultTimeout
from minitask.broker.pools import (GLANCE_EVERY, LAST_LOOK, PoolExhausted, ResultWaits,
                                   WaitingPool, _Turns, pool_waits_cut_at)
from minitask.ranout import LOOK_GRACE

#: Bounds every wait of these tests.
DEADLINE = 10.0


def _pool(size: int, timeout: float) -> WaitingPool:
    like = fakeredis.FakeRedis().connection_pool
    return WaitingPool(connection_class=like.connection_class, max_connections=size,
                       timeout=timeout, **like.connection_kwargs)


def _started(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_cut_bounds_a_callers_wait_for_a_full_pool_and_says_so() -> None:
    pool = _pool(1, timeout=20.0)
    taken = pool.get_connection()
    began = time.monotonic()
    with pytest.raises(PoolExhausted, match="stayed in use until the caller's own deadline"):
        with pool_waits_cut_at(began + 0.2):
            pool.get_connection()
    assert 0.19 <= time.monotonic() - began < 5.0
    pool.release(taken)
    with pool_waits_cut_at(time.monotonic() + 0.2):  # a free connection: no wait at all
        pool.release(pool.get_connection())
    pool.disconnect()


def test_a_callers_sleep_ends_at_the_release_not_at_a_recheck() -> None:
    """Ten callers of a one-connection pool, each holding it for 10 ms: served one
    after another by releases, not by a periodic look (1 s apart now)."""
    pool = _pool(1, timeout=20.0)
    served: List[float] = []

    def call() -> None:
        connection = pool.get_connection()
        time.sleep(0.01)
        served.append(time.monotonic())
        pool.release(connection)

    began = time.monotonic()
    threads = [_started(call) for _ in range(10)]
    for thread in threads:
        thread.join(DEADLINE)
    assert len(served) == 10
    assert max(served) - began < 0.9, f"served after {max(served) - began:.2f} s"
    pool.disconnect()


def test_a_connection_given_back_goes_to_the_wait_queued_longest() -> None:
    turns = _Turns(1)
    assert turns.acquire()
    first, second = turns.join("a"), turns.join("b")
    assert first is not None and second is not None
    assert not turns.acquire()  # waits are queued: a newcomer does not jump them
    turns.release()
    assert first.granted and not second.granted
    turns.abandon(first)  # ends by an exception holding it: the next one gets it
    assert second.granted
    turns.release()
    assert turns.acquire()  # nothing queued any more


def test_a_queued_wait_abandoned_leaves_the_queue_and_the_next_one_glances() -> None:
    client = fakeredis.FakeRedis()
    client.rpush("b", b"there")
    turns = _Turns(1)
    assert turns.acquire()
    first, second = turns.join("a"), turns.join("b")
    assert first is not None and second is not None
    turns.abandon(first)
    assert not turns.wait(second, time.monotonic() + DEADLINE, client)
    assert second.found == b"there"


def test_a_glance_wakes_the_wait_whose_result_it_found_long_before_its_deadline() -> None:
    client = fakeredis.FakeRedis(max_connections=2)  # one waiting connection
    waits = ResultWaits(client)
    turns, _ = waits._gate()
    assert turns.acquire()  # held by a wait for another result
    got: List[Any] = []
    waiters = [_started(lambda key=key: got.append((key, waits.read(key, DEADLINE))))
               for key in ("absent", "later")]
    time.sleep(3 * GLANCE_EVERY)
    began = time.monotonic()
    client.rpush("later", b"value")
    waiters[1].join(DEADLINE)
    assert got == [("later", b"value")]
    assert time.monotonic() - began < DEADLINE / 2
    turns.release()  # "absent" now blocks on the connection, and runs out
    waiters[0].join(DEADLINE)
    assert got[1] == ("absent", None)
    assert turns.acquire()  # every connection came back
    waits.close()


def test_a_get_whose_message_cannot_get_a_connection_raises_within_the_grace() -> None:
    """The sending pool held by others for longer than the wait: get(timeout=1) raises
    by about its deadline plus ``LOOK_GRACE``, saying its status was not read, not
    after the pool's 20 s (its reads of the task's state are cut at its deadline)."""
    pool = _pool(1, timeout=20.0)
    app = Minitask("graces", broker=redis.Redis(connection_pool=pool))

    @app.task(queue="q")
    def never() -> None:
        """Never run: its wait runs out."""

    handle = never.delay()
    held = pool.get_connection()  # the sending pool's one connection, taken elsewhere
    try:
        began = time.monotonic()
        with pytest.raises(ResultTimeout, match="its status was not read"):
            handle.get(timeout=1.0)
        seconds = time.monotonic() - began
        assert seconds < 1.0 + LOOK_GRACE + 2.0, f"raised after {seconds:.2f} s"
    finally:
        pool.release(held)
        app.close()


def test_a_queued_wait_ends_by_its_deadline_while_the_sending_pool_stays_full() -> None:
    """Every waiting connection and every sending one held elsewhere: the glance and
    the wait's own last look give up with the wait (plus ``LAST_LOOK``), not after
    the sending pool's 20 s."""
    pool = _pool(2, timeout=20.0)
    waits = ResultWaits(redis.Redis(connection_pool=pool))
    turns, _ = waits._gate()
    assert turns.acquire() and turns.acquire()  # both waiting connections taken
    held = [pool.get_connection(), pool.get_connection()]
    got: List[Any] = []
    began = time.monotonic()
    waiter = _started(lambda: got.append(waits.read("absent", 0.3)))
    waiter.join(DEADLINE)
    try:
        assert got == [None]
        assert time.monotonic() - began < 0.3 + LAST_LOOK + 2.0
    finally:
        for connection in held:
            pool.release(connection)
        turns.release()
        turns.release()
        waits.close()


def _queued_behind(turns: _Turns, count: int) -> List[Any]:
    """``count`` waits queued on keys of their own, each key read once by a glance."""
    queued = [turns.join(f"other:{n}") for n in range(count)]
    keys = [f"other:{n}" for n in range(count)]
    turns._tell(keys, [None] * count, time.monotonic())
    return queued


def test_a_key_no_glance_read_yet_is_read_first_however_many_wait() -> None:
    """2,000 queued waits whose keys were read: a new wait's key is in the next glance
    (a result already there is not read after a turn of 20 glances), and new keys take
    half a glance at most (older ones are not starved by newcomers)."""
    turns = _Turns(1)
    assert turns.acquire()
    _queued_behind(turns, 2000)
    for n in range(200):
        turns.join(f"new:{n}")
    keys = turns._due_keys()
    assert len(keys) == 100
    assert [key for key in keys if key.startswith("new:")] == [f"new:{n}" for n in range(50)]
    assert len([key for key in keys if key.startswith("other:")]) == 50


def test_a_result_come_after_its_keys_last_glance_is_read_by_the_waits_own_look() -> None:
    """A glance read the key long before the deadline and found nothing; the result
    came after: the wait's own last look at its deadline returns it, not None."""
    client = fakeredis.FakeRedis(max_connections=2)
    waits = ResultWaits(client)
    turns, _ = waits._gate()
    assert turns.acquire()  # the one waiting connection, held elsewhere
    seen = turns.join("late")
    assert seen is not None
    turns._tell(["late"], [None], time.monotonic() - 1.0)  # read a second ago: nothing
    client.rpush("late", b"value")
    assert not turns.wait(seen, time.monotonic() + 0.01, client)
    assert waits._found(seen) == b"value"
    turns.release()
    waits.close()


def test_a_glance_begun_before_a_wait_queued_does_not_count_as_its_look() -> None:
    turns = _Turns(1)
    assert turns.acquire()
    began = time.monotonic() - 0.05
    seen = turns.join("k")
    assert seen is not None
    turns._tell(["k"], [None], began)
    assert seen.looked == -math.inf


def test_a_pool_reset_as_in_a_forked_child_keeps_none_of_the_sleepers_before_it() -> None:
    """redis-py resets a pool in a forked child: the parent's threads asleep on it are
    not in the child, and a release there must wake a caller of the child's own, not
    one of them (each notify taken by such a ghost left a real caller asleep 1 s)."""
    pool = _pool(1, timeout=20.0)
    held = pool.get_connection()
    sleepers = [_started(lambda: pool.release(pool.get_connection())) for _ in range(3)]
    deadline = time.monotonic() + DEADLINE
    while len(pool._freed._waiters) < 3:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the callers never slept on the full pool"
        time.sleep(0.01)
    pool.reset()
    assert not pool._freed._waiters  # type: ignore[attr-defined]
    pool.release(held)
    for sleeper in sleepers:
        sleeper.join(DEADLINE)
    pool.disconnect()
