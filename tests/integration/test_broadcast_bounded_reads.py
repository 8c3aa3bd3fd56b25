"""Oversized values planted in a broadcast queue's keys are never read whole again
(issue 29, sections 1 and 3), on a real redis-server.

* A call's body in ``bcast:bodies`` longer than max_message_bytes is measured
  (HSTRLEN) by a pull and never copied into a subscriber's lane: the subscriber
  passes it by, one log line names the key and the call, and a real worker runs
  the next call and the tasks of its other queue.
* A huge value in ``bcast:seen``, ``bcast:cursors``, ``bcast:state`` or
  ``bcast:names`` is never sent to a client by ``app.subscribers()``, the status
  and dashboard listing (``few``), or a handle's ``status``, ``subscribers`` and
  ``join``: what Redis sends to clients (INFO's total_net_output_bytes, a count of
  bytes: no timing) stays far below the planted size, call after call.
* The cursors hash is read a page at a time (no HGETALL, whatever its size).
* A ``bcast:since`` member longer than any name is never in a send's or a pull's
  reply (the lanes it wakes).

Each failed before the fix (but ``test_a_huge_seen_value_says_never_seen``, which
pins what a listing shows): the pull copied the body into the lane, and the reads
took the values (HGETALL, HGET, HMGET) whole each time.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Tuple

import pytest
import redis

from minitask import Minitask, ResultTimeout
from minitask.broker.keys import QueueKeys, lane
from minitask.stores.broadcast import Pulled
from tests.apps.foreign import build
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

QUEUE = "news"
#: Longer than any value minitask writes in these keys (a body: max_message_bytes,
#: 1 MiB by default; a number: 32 bytes; an older minitask's names: 1 MiB).
HUGE = b"7" * 3_000_000
#: What a bounded read may send at most, well below HUGE.
SENT_MOST = 500_000
DEADLINE = 60.0


def _now_ms() -> int:
    return int(time.time() * 1000)


def _app(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client())

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _sent(admin: "redis.Redis[bytes]") -> int:
    """Bytes Redis has sent to its clients so far."""
    return int(admin.info("stats")["total_net_output_bytes"])


def _bounded(admin: "redis.Redis[bytes]", read: Callable[[], Any]) -> Any:
    """``read()``'s answer, asserting that Redis sent its clients less than SENT_MOST
    bytes meanwhile (the planted value is HUGE: it was not sent)."""
    before = _sent(admin)
    answer = read()
    sent = _sent(admin) - before
    assert sent < SENT_MOST, f"{sent:,} bytes sent for one read"
    return answer


def _plant_call(admin: "redis.Redis[bytes]", k: QueueKeys, call_id: str, body: bytes) -> None:
    """A call in the queue's log as a send writes it, with ``body``: at once (MULTI),
    so that a worker's pull never meets it half-written."""
    seq = admin.hincrby(k.broadcast("state"), "seq", 1)
    with admin.pipeline(transaction=True) as pipe:
        pipe.hset(k.broadcast("bodies"), call_id, body)
        pipe.hset(k.broadcast("sent"), call_id, _now_ms())
        pipe.zadd(k.broadcast("joins"), {call_id: seq})
        pipe.zadd(k.broadcast("log"), {call_id: seq})
        pipe.execute()


def _pull(app: Minitask, name: str) -> Pulled:
    store = app.broker.broadcasts
    reply = app.broker.transport.run_calls(
        [store.pull_call(QUEUE, name, 10, _now_ms(), app.max_message_bytes)], "pull")[0]
    return store.pulled(reply)


# -- the pull: a body longer than max_message_bytes --------------------------------


def test_a_pull_passes_a_huge_body_by_unread_and_pulls_the_next(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "hugebody")
    k = QueueKeys(app.name, QUEUE)
    own = QueueKeys(app.name, lane(QUEUE, "sub1"))
    try:
        for name in ("sub1", "sub2"):
            app.broker.broadcasts.subscribe(QUEUE, name, _now_ms())
        _plant_call(admin, k, "planted", HUGE)
        tick.delay(2)
        for name in ("sub1", "sub2"):  # each passes it by, and pulls the call after it
            assert _bounded(admin, lambda: _pull(app, name)).pulled == 1
        assert not admin.hexists(own.messages, "planted")  # never copied into the lane
        assert admin.hlen(own.messages) == 1  # the call after it was
        assert admin.memory_usage(own.messages) < SENT_MOST
        # every subscriber past it: it left the log as a pulled call does
        assert admin.zscore(k.broadcast("log"), "planted") is None
    finally:
        app.close()


def test_a_pulls_note_names_the_key_and_the_call_once(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "hugenote")
    k = QueueKeys(app.name, QUEUE)
    try:
        app.broker.broadcasts.subscribe(QUEUE, "sub1", _now_ms())
        _plant_call(admin, k, "planted", HUGE)
        tick.delay(2)
        first = _pull(app, "sub1")
        assert first.pulled == 1
        assert k.broadcast("bodies") in first.note and '"planted"' in first.note
        assert f"{len(HUGE)} bytes" in first.note
        assert _pull(app, "sub1").note == ""  # passed by: not met again
    finally:
        app.close()


@pytest.fixture
def producer(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = build(redis_server.url)
    try:
        yield made
    finally:
        made.close()


def test_a_real_worker_passes_a_huge_body_by_and_serves_its_queues(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", producer: Minitask,
        processes: Processes, tmp_path: Path) -> None:
    """The worker runs a task of queue other and the broadcast call after the planted
    one; the planted body never enters its lane; one log line names key and call."""
    news = QueueKeys("foreign", "news")
    own = QueueKeys("foreign", lane("news", "sub1"))
    log = tmp_path / "worker.log"
    worker = processes.worker("tests.apps.foreign", "-Q", "other,news", "--pool", "thread",
                              "--name", "sub1", env={"MINITASK_BROKER_URL": redis_server.url},
                              log=log)
    wait_until(lambda: admin.hexists(news.broadcast("cursors"), "sub1")
               or worker.poll() is not None, timeout=DEADLINE, message="the subscription")
    _plant_call(admin, news, "planted", HUGE)
    handle = producer.tasks["hear"].delay(7)
    assert handle.join(timeout=DEADLINE, subscribers=["sub1"]) == {"sub1": 7}
    token = uuid.uuid4().hex
    producer.tasks["mark"].delay(token)
    wait_until(lambda: token.encode() in admin.lrange("marks:other", 0, -1)
               or worker.poll() is not None, timeout=DEADLINE, message="a task of queue other")
    assert worker.poll() is None, log.read_text()[-3000:]
    # never in its lane: neither held nor dead-lettered there as too large
    assert not admin.hexists(own.messages, "planted")
    assert admin.zscore(own.dead, "planted") is None
    said = [line for line in log.read_text().splitlines()
            if news.broadcast("bodies") in line and "planted" in line]
    assert len(said) == 1 and "max_message_bytes" in said[0], said


# -- the listings: seen, cursors, state, names -------------------------------------


def _subscribed(redis_server: RedisServer, name: str) -> Tuple[Minitask, Any, QueueKeys]:
    app, tick = _app(redis_server, name)
    for sub in ("sub1", "sub2"):
        app.broker.broadcasts.subscribe(QUEUE, sub, _now_ms())
    return app, tick, QueueKeys(app.name, QUEUE)


@pytest.mark.parametrize("where", ["seen", "seen-ghost", "cursors", "state"])
def test_listings_never_send_a_huge_value(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", where: str) -> None:
    app, tick, k = _subscribed(redis_server, "hugelist" + where.replace("-", ""))
    try:
        handle = tick.delay(1)
        if where == "seen":
            admin.hset(k.broadcast("seen"), "sub2", HUGE)
        elif where == "seen-ghost":  # a field of no subscriber
            admin.hset(k.broadcast("seen"), "ghost", HUGE)
        elif where == "cursors":
            admin.hset(k.broadcast("cursors"), "sub2", HUGE)
        else:
            admin.hset(k.broadcast("state"), "seq", HUGE)
        for _ in range(2):  # and again: nothing read whole the first time is the next
            listed = _bounded(admin, lambda: app.subscribers(QUEUE))
            assert [s.name for s in listed] == ["sub1", "sub2"]
            rows, count = _bounded(admin, lambda: app.broker.broadcasts.few(QUEUE, 50))
            assert sorted(row.name for row in rows) == ["sub1", "sub2"] and count == 2
            _bounded(admin, handle.status)
            assert sorted(_bounded(admin, handle.subscribers)) == ["sub1", "sub2"]
    finally:
        app.close()


def test_a_huge_seen_value_says_never_seen(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, _, k = _subscribed(redis_server, "hugeseen")
    try:
        admin.hset(k.broadcast("seen"), "sub2", HUGE)
        seen: Dict[str, Any] = {s.name: s.last_seen for s in app.subscribers(QUEUE)}
        assert seen["sub2"] is None and seen["sub1"] is not None
    finally:
        app.close()


def test_a_huge_names_record_is_never_read(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """bcast:names (an older minitask's names of a call) planted huge: status,
    subscribers and join read who the call went to from the since index instead."""
    app, tick, k = _subscribed(redis_server, "hugenames")
    try:
        handle = tick.delay(1)
        admin.hset(k.broadcast("names"), handle.id, HUGE)
        for _ in range(2):
            assert _bounded(admin, handle.status) == "queued"
            assert sorted(_bounded(admin, handle.subscribers)) == ["sub1", "sub2"]
            with pytest.raises(ResultTimeout):
                _bounded(admin, lambda: handle.join(timeout=0.05, subscribers=["sub1"]))
            with pytest.raises(ResultTimeout):
                _bounded(admin, lambda: handle.join(timeout=0.05))
    finally:
        app.close()


def test_the_cursors_hash_is_read_a_page_at_a_time(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """20,000 planted cursors: listed by HSCAN pages, never one HGETALL."""
    app, _, k = _subscribed(redis_server, "manycursors")
    try:
        with admin.pipeline(transaction=False) as pipe:
            for first in range(0, 20_000, 5_000):
                pipe.hset(k.broadcast("cursors"), mapping={
                    f"w{n}": 0 for n in range(first, first + 5_000)})
            pipe.execute()
        admin.config_resetstat()
        listed = app.subscribers(QUEUE)
        assert len(listed) == 20_002
        stats = admin.info("commandstats")
        assert "cmdstat_hgetall" not in stats
        assert stats["cmdstat_hscan"]["calls"] >= 20_000 // 1_000  # pages
    finally:
        app.close()


def test_a_huge_since_member_is_never_sent_to_a_sender_or_a_puller(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """A member of bcast:since longer than any subscriber name, subscribed last (the
    first a send wakes): no send or pull reply carries it, every time."""
    app, tick, k = _subscribed(redis_server, "hugesince")
    try:
        admin.zadd(k.broadcast("since"), {HUGE: 0})
        admin.zadd(k.broadcast("alive"), {HUGE: _now_ms()})
        for n in range(2):
            _bounded(admin, lambda: tick.delay(n))
            assert _bounded(admin, lambda: _pull(app, "sub1")).pulled == 1
        assert sorted(s.name for s in _bounded(admin, lambda: app.subscribers(QUEUE))) == [
            "sub1", "sub2"]
    finally:
        app.close()


def test_minitask_status_and_the_dashboard_never_send_a_huge_seen_value(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from minitask.cli import status as status_command
    from minitask.dashboard.subscribers import subscriber_rows
    from tests.support.cli import operate_with, run

    app, tick, k = _subscribed(redis_server, "hugestatus")
    try:
        tick.delay(1)
        admin.hset(k.broadcast("seen"), "sub2", HUGE)
        operate_with(app, monkeypatch, status_command)
        for _ in range(2):
            code, text = _bounded(admin, lambda: run(capsys, "status", "-A", "x"))
            assert code == 0 and "sub2" in text and "Traceback" not in text, text[-2000:]
            rows = _bounded(admin, lambda: subscriber_rows(app))
            assert "sub2" in repr(rows)
    finally:
        app.close()
