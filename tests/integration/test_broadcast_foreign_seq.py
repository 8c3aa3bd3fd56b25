"""A broadcast queue's keys holding what minitask did not write, or losing what it
did, on a real redis-server (issue 29, probe 9: H1, M1, M7).

* Cursors of another type planted *before* a real worker starts refuse only that
  queue's subscription (one log line names the key): the worker serves its other
  queues, and subscribes once the key is fixed.
* State's ``seq`` deleted (or evicted): the next send numbers its calls above every
  cursor and logged call, so each subscriber runs them; a subscriber subscribing
  then starts after the calls already sent.
* State's ``seq`` no call sequence (1e400, inf, nan, -1, 1.5, text): a subscription
  starts from the highest sequence the log and cursors show, never from ``inf``,
  so ``subscribers()`` and ``join()`` count the subscriber.
"""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
import redis

from minitask import Minitask, ResultTimeout
from minitask.broker.keys import QueueKeys, lane
from tests.apps.foreign import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

APP = "tests.apps.foreign"
NEWS = QueueKeys("foreign", "news")
#: How long a worker may take to start and run a task on a busy shared machine (s).
DEADLINE = 60.0


def ran(admin: "redis.Redis[bytes]", token: str) -> bool:
    return token.encode() in admin.lrange("marks:other", 0, -1)


@pytest.fixture
def producer(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = build(redis_server.url)
    try:
        yield made
    finally:
        made.close()


def start_worker(processes: Processes, redis_server: RedisServer, log: Path) -> Any:
    return processes.worker(APP, "-Q", "other,news", "--pool", "thread", "--name", "sub1",
                            env={"MINITASK_BROKER_URL": redis_server.url}, log=log)


def test_cursors_of_another_type_before_the_start_refuse_only_that_queue(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", producer: Minitask,
        processes: Processes, tmp_path: Path) -> None:
    """H1: the worker starts and runs a task of queue other; one log line names the
    cursors key; once the key is deleted, its pulls subscribe it and a call runs."""
    cursors = NEWS.broadcast("cursors")
    admin.set(cursors, "planted")
    log = tmp_path / "worker.log"
    worker = start_worker(processes, redis_server, log)
    for _ in range(2):  # the second after a few of the worker's rounds (pulls)
        token = uuid.uuid4().hex
        producer.tasks["mark"].delay(token)
        wait_until(lambda: ran(admin, token) or worker.poll() is not None, timeout=DEADLINE,
                   message="a task of queue 'other'")
        assert worker.poll() is None, log.read_text()[-3000:]
        assert ran(admin, token)
    assert admin.get(cursors) == b"planted"  # left as it was
    said = [line for line in log.read_text().splitlines() if cursors in line]
    assert len(said) == 1 and "holds another type" in said[0], said
    admin.delete(cursors)
    # the pull of a round (at most one idle wait away) subscribes it, from now on
    wait_until(lambda: admin.hexists(cursors, "sub1"), timeout=DEADLINE,
               message="the worker's pull subscribing it once the key is fixed")
    handle = producer.tasks["hear"].delay(7)
    assert handle.join(timeout=DEADLINE) == {"sub1": 7}
    assert worker.poll() is None, log.read_text()[-3000:]


def test_every_other_broadcast_key_of_another_type_before_the_start_stops_nothing(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", producer: Minitask,
        processes: Processes, tmp_path: Path) -> None:
    """The other keys of queue news and of sub1's lane, all of another type at once
    before the worker starts: it starts and runs a task of queue other."""
    own = QueueKeys("foreign", lane("news", "sub1"))
    parts = ("state", "log", "bodies", "sent", "seen", "places", "since", "alive", "names",
             "joins")
    planted = [NEWS.broadcast(part) for part in parts]
    planted += [own.messages, own.ready[0], own.wake]
    for key in planted:
        admin.set(key, "planted")
    log = tmp_path / "worker.log"
    worker = start_worker(processes, redis_server, log)
    token = uuid.uuid4().hex
    producer.tasks["mark"].delay(token)
    wait_until(lambda: ran(admin, token) or worker.poll() is not None, timeout=DEADLINE,
               message="a task of queue 'other'")
    assert worker.poll() is None, log.read_text()[-3000:]
    assert ran(admin, token)


# -- state's seq: lost, or no call sequence --------------------------------------------


def run_subscribers(app: Minitask, *names: str) -> None:
    """A burst worker of each subscriber: it subscribes, runs its calls, and stops
    (within the deadline: one that runs calls again and again is stopped, and fails)."""
    for name in names:
        worker = app.worker(queues=["news"], burst=True, subscriber=name)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        thread.join(DEADLINE)
        if thread.is_alive():
            worker.stop()
            thread.join(DEADLINE)
            raise AssertionError(f"the burst worker of {name!r} did not stop within "
                                 f"{DEADLINE} s")


def since(admin: "redis.Redis[bytes]") -> Dict[str, float]:
    return {name.decode(): score for name, score in
            admin.zrange(NEWS.broadcast("since"), 0, -1, withscores=True)}


def test_a_send_after_seq_is_deleted_runs_on_every_subscriber(
        admin: "redis.Redis[bytes]", producer: Minitask) -> None:
    """M1: s1 and s2 ran calls 0..4 (cursors 5), 'behind' pulled none; seq is deleted;
    a batch of calls 10..12 then runs on s1 and s2. Seq deleted again: a subscriber
    that subscribes then runs only what is sent after it subscribed."""
    hear = producer.tasks["hear"]
    state = NEWS.broadcast("state")
    run_subscribers(producer, "s1", "s2")
    producer.broker.broadcasts.subscribe("news", "behind", int(time.time() * 1000))
    first = hear.delay_many([(n,) for n in range(5)])
    run_subscribers(producer, "s1", "s2")
    assert first[-1].join(timeout=DEADLINE, subscribers=["s1", "s2"]) == {"s1": 4, "s2": 4}
    admin.hdel(state, "seq")
    handles = hear.delay_many([(n,) for n in range(10, 13)])
    run_subscribers(producer, "s1", "s2")
    for n, handle in zip(range(10, 13), handles):
        assert sorted(handle.subscribers()) == ["behind", "s1", "s2"]
        assert handle.join(timeout=DEADLINE, subscribers=["s1", "s2"]) == {"s1": n, "s2": n}
    assert admin.hget(state, "seq") == b"8"
    admin.hdel(state, "seq")
    run_subscribers(producer, "late")  # subscribes with seq gone: after call 12
    assert since(admin)["late"] == 8, since(admin)
    last = hear.delay(20)
    run_subscribers(producer, "s1", "s2", "late")
    assert last.join(timeout=DEADLINE, subscribers=["s1", "s2", "late"]) == \
        {"s1": 20, "s2": 20, "late": 20}
    # the calls before were sent before late subscribed (behind holds them in the log)
    assert all("late" not in handle.subscribers() for handle in first + handles)
    assert producer.broker.broadcasts.log_size("news") == 9
    assert admin.hget(state, "seq") == b"9"


def test_a_seq_set_back_below_the_cursors_runs_no_call_again(
        admin: "redis.Redis[bytes]", producer: Minitask) -> None:
    """Seq set back (by hand, a restore) below s1's cursor 5: s1's pull keeps its
    cursor (it ran calls 0..4 once, where it ran them again and again), and the next
    call runs on it once, numbered above the cursors."""
    hear = producer.tasks["hear"]
    state, cursors = NEWS.broadcast("state"), NEWS.broadcast("cursors")
    run_subscribers(producer, "s1")
    producer.broker.broadcasts.subscribe("news", "behind", int(time.time() * 1000))
    first = hear.delay_many([(n,) for n in range(5)])
    run_subscribers(producer, "s1")
    assert first[-1].join(timeout=DEADLINE, subscribers=["s1"]) == {"s1": 4}
    admin.hset(state, "seq", 2)
    run_subscribers(producer, "s1")
    assert admin.hget(cursors, "s1") == b"5"
    last = hear.delay(30)
    run_subscribers(producer, "s1")
    assert last.join(timeout=DEADLINE, subscribers=["s1"]) == {"s1": 30}
    assert admin.hget(state, "seq") == b"6"


FOREIGN_SEQS = [b"1e400", b"inf", b"-inf", b"nan", b"-1", b"1.5", b"abc"]


@pytest.mark.parametrize("planted", FOREIGN_SEQS, ids=[s.decode() for s in FOREIGN_SEQS])
def test_join_waits_for_subscribers_that_subscribed_over_a_foreign_seq(
        admin: "redis.Redis[bytes]", producer: Minitask, planted: bytes) -> None:
    """M7: seq planted, then s2 and s3 subscribe: their ``since`` is a sequence, the
    call sent next lists them, join() waits for them, then has both outcomes."""
    run_subscribers(producer, "s1")
    producer.tasks["hear"].delay(1)
    run_subscribers(producer, "s1")  # s1's cursor is 1
    admin.hset(NEWS.broadcast("state"), "seq", planted)
    run_subscribers(producer, "s2", "s3")
    assert since(admin) == {"s1": 0, "s2": 1, "s3": 1}
    handle = producer.tasks["hear"].delay(7)
    assert sorted(handle.subscribers()) == ["s1", "s2", "s3"]
    with pytest.raises(ResultTimeout):
        handle.join(timeout=0.3)  # nobody has run it yet: it waits
    run_subscribers(producer, "s1", "s2", "s3")
    assert handle.join(timeout=DEADLINE) == {"s1": 7, "s2": 7, "s3": 7}
    assert admin.hget(NEWS.broadcast("state"), "seq") == b"2"
