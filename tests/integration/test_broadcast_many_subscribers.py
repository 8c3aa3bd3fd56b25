"""Broadcast tasks with many subscribers, against the suite's real redis-server: a
pull and a send run a bounded number of Redis commands whatever the number of
subscribers, a subscriber not seen past broadcast_ttl is pruned, cursors written
by the previous layout (a hash only) are indexed a batch at a time without losing
a call, and a foreign subscriber name does not break join()."""
from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys, lane
from minitask.cli.main import main
from minitask.cli.status import SHOWN_SUBSCRIBERS
from tests.apps.broadcast import QUEUE as FAN
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "many"
#: Commands a send or a pull may run, at most (each about 40 today; the previous
#: layout's read every subscriber's cursor, and a send a key per subscriber).
MOST_COMMANDS = 200


def _app(redis_server: RedisServer, name: str, **options: Any) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client(), **options)

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _now_ms() -> int:
    return int(time.time() * 1000)


def _plant(admin: "redis.Redis[bytes]", k: QueueKeys, count: int, seen_ms: int,
           indexed: bool = True) -> None:
    """``count`` subscribers sub0.. at cursor 0; ``indexed`` False: the previous
    layout (cursors and seen hashes only)."""
    pipe = admin.pipeline(transaction=False)
    for first in range(0, count, 1000):
        names = [f"sub{i}" for i in range(first, min(first + 1000, count))]
        pipe.hset(k.broadcast("cursors"), mapping={name: 0 for name in names})
        pipe.hset(k.broadcast("seen"), mapping={name: seen_ms for name in names})
        if indexed:  # and a scan of them done (state's indexed)
            pipe.hset(k.broadcast("state"), "indexed", 1)
            pipe.zadd(k.broadcast("places"), {name: 0 for name in names})
            pipe.zadd(k.broadcast("since"), {name: 0 for name in names})
            pipe.zadd(k.broadcast("alive"), {name: seen_ms for name in names})
    pipe.execute()


def _commands(admin: "redis.Redis[bytes]") -> Dict[str, int]:
    """Commands run since the last CONFIG RESETSTAT (scripts' own included), by name."""
    stats = admin.info("commandstats")
    return {name[len("cmdstat_"):]: int(value["calls"]) for name, value in stats.items()
            if name not in ("cmdstat_info", "cmdstat_config")}


def test_a_send_and_a_pull_run_a_bounded_number_of_commands_with_20000_subscribers(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "wide")
    k = QueueKeys("wide", QUEUE)
    try:
        _plant(admin, k, 20_000, _now_ms())
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        tick.delay(0)
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()  # scripts loaded
        store = app.broker.broadcasts
        admin.config_resetstat()
        handle = tick.delay(1)
        sent = _commands(admin)
        admin.config_resetstat()
        app.broker.transport.run_calls([store.pull_call(QUEUE, "live", 10, _now_ms())],
                                       "pull")
        pulled = _commands(admin)
        # no command that reads every subscriber ran, and few ran at all
        for counted in (sent, pulled):
            shown = " ".join(f"{name}={calls}" for name, calls in sorted(counted.items()))
            assert not {"hkeys", "hvals", "hgetall", "hscan"} & set(counted), shown
            assert sum(counted.values()) < MOST_COMMANDS, shown
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert handle.join(timeout=10, subscribers=["live"]) == {"live": 1}
        # every planted subscriber still has the call to pull: none was dropped
        assert app.broker.broadcasts.log_size(QUEUE) == 2
        assert len(handle.subscribers()) == 20_001
    finally:
        app.close()


def test_a_subscriber_not_seen_past_broadcast_ttl_is_pruned(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "stale", broadcast_ttl=3600.0)
    k = QueueKeys("stale", QUEUE)
    try:
        two_hours_ago = _now_ms() - 7_200_000
        _plant(admin, k, 40, two_hours_ago)  # more than one batch (16) of pruning
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        for n in range(3):  # each send prunes a batch, the pulls more
            tick.delay(n)
            app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert [s.name for s in app.subscribers(QUEUE)] == ["live"]
        for part in ("cursors", "seen"):
            assert admin.hkeys(k.broadcast(part)) == [b"live"]
        for part in ("places", "since", "alive"):
            assert admin.zrange(k.broadcast(part), 0, -1) == [b"live"]
        handle = tick.delay(7)
        assert handle.subscribers() == ["live"]
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert handle.join(timeout=10) == {"live": 7}
        assert app.broker.broadcasts.log_size(QUEUE) == 0  # the pruned kept nothing
        # one that comes back is a new subscriber, from the last call sent
        assert app.broker.broadcasts.subscribe(QUEUE, "sub3", _now_ms())
        assert {s.name: s.lag for s in app.subscribers(QUEUE)} == {"live": 0, "sub3": 0}
    finally:
        app.close()


def test_cursors_of_the_previous_layout_are_indexed_and_lose_no_call(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """2,500 subscribers of the previous layout (cursors and seen hashes, a call whose
    subscribers are kept joined in names): a new worker's subscribe and pulls index
    them a batch at a time; until they are all indexed no call is dropped as pulled,
    and an old subscriber still runs every call, in order."""
    app, tick = _app(redis_server, "old")
    k = QueueKeys("old", QUEUE)
    try:
        now = _now_ms()
        _plant(admin, k, 2500, now, indexed=False)
        # a call the previous version sent: its subscribers joined by newlines in names
        old = tick.apply_async((41,), task_id="old-call")
        admin.hset(k.broadcast("names"), "old-call",
                   "\n".join(f"sub{i}" for i in range(2500)))
        handles = [tick.delay(n) for n in range(3)]
        assert len(handles[0].subscribers()) == 2500  # subscribed before, all still here
        runs: List[int] = []
        for _ in range(20):
            app.worker(queues=[QUEUE], burst=True, subscriber="sub7").run()
            runs = [h.join(timeout=10, subscribers=["sub7"])["sub7"] for h in handles]
            if admin.zcard(k.broadcast("places")) == 2500:
                break
            # not all indexed yet: nothing another old subscriber needs was dropped
            assert app.broker.broadcasts.log_size(QUEUE) == 4
        assert runs == [0, 1, 2]
        assert admin.zcard(k.broadcast("places")) == 2500
        assert admin.zcard(k.broadcast("since")) == 2500
        assert admin.zcard(k.broadcast("alive")) == 2500
        assert app.broker.broadcasts.log_size(QUEUE) == 4  # sub0 has pulled none
        assert sorted(old.subscribers()) == sorted(f"sub{i}" for i in range(2500))
        app.worker(queues=[QUEUE], burst=True, subscriber="sub0").run()
        assert handles[2].join(timeout=10, subscribers=["sub0"]) == {"sub0": 2}
        assert old.join(timeout=10, subscribers=["sub0", "sub7"]) == {"sub0": 41, "sub7": 41}
    finally:
        app.close()


def test_a_foreign_subscriber_name_is_skipped_by_join(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "odd")
    k = QueueKeys("odd", QUEUE)
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        admin.hset(k.broadcast("cursors"), mapping={"bad\x00name": 0, "has space": 0})
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()  # indexes them
        handle = tick.delay(5)
        assert handle.subscribers() == ["live"]
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert handle.join(timeout=10) == {"live": 5}
    finally:
        app.close()


def test_status_shows_a_bounded_number_of_subscribers_and_counts_the_rest(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MINITASK_BROKER_URL", redis_server.url)
    k = QueueKeys("bcast", FAN)
    _plant(admin, k, 250, _now_ms())
    admin.hset(k.broadcast("state"), "seq", 5)
    admin.zadd(k.broadcast("places"), {"sub3": 5})  # caught up: not among the furthest
    admin.hset(k.broadcast("cursors"), "sub3", 5)
    assert main(["status", "-A", "tests.apps.broadcast", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["subscribers"][FAN]
    assert len(rows) == SHOWN_SUBSCRIBERS
    assert {row["lag"] for row in rows} == {5}
    assert report["subscribers_left_out"] == {FAN: 150}
    assert main(["status", "-A", "tests.apps.broadcast"]) == 0
    out = capsys.readouterr().out
    assert "... and 150 more subscriber(s), not shown" in out
    assert out.count(" lag 5 ") == SHOWN_SUBSCRIBERS


def test_a_wake_up_spreads_as_a_tree_over_the_subscribers_newest_first(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """40 subscribers, s0 the oldest: a send wakes the 16 newest (s39..s24), and the
    newest, pulling the call, wakes its 16 children (s23..s8); s7..s0 are reached by
    the children's pulls (here: none runs, so they hold no token)."""
    app, tick = _app(redis_server, "tree")
    store = app.broker.broadcasts
    try:
        for i in range(40):
            admin.hset(QueueKeys("tree", QUEUE).broadcast("state"), "seq", i)
            store.subscribe(QUEUE, f"s{i}", _now_ms())
        tick.delay(1)

        def woken() -> List[int]:
            return [i for i in range(40)
                    if admin.llen(QueueKeys("tree", lane(QUEUE, f"s{i}")).wake)]

        assert woken() == list(range(24, 40))
        reply = app.broker.transport.run_calls(
            [store.pull_call(QUEUE, "s39", 10, _now_ms())], "pull")[0]
        pulled = store.pulled(reply)  # as a worker does: wakes those it could not
        store.woken(QUEUE, "s39", pulled.woken, pulled.missed, pulled.pulled)
        assert woken() == list(range(8, 40))
    finally:
        app.close()
