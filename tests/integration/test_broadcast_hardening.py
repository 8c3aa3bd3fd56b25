"""Issue 29's review of the broadcast layout, against the suite's real redis-server:
a worker of the previous version (it renews only the ``seen`` hash) is not pruned,
the previous layout's cursors are indexed until a scan of the hash came back to 0
(not until two counts agree), prunes age subscribers by the server's clock and the
longest broadcast_ttl given, and no script touches a key it was not given."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys, lane
from minitask.errors import BrokerError
from minitask.stores.broadcast import BroadcastStore
from minitask.stores.scripts import source
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

QUEUE = "hard"


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Ahead:
    """A worker's clock that runs ``seconds`` ahead of the real one."""

    def __init__(self, seconds: float) -> None:
        self.offset_ms = int(seconds * 1000)

    def now_ms(self) -> int:
        return _now_ms() + self.offset_ms


def _app(redis_server: RedisServer, name: str, **options: Any) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=redis_server.client(), **options)

    @app.task(broadcast=True, queue=QUEUE)
    def tick(n: int) -> int:
        return n

    return app, tick


def _index(admin: "redis.Redis[bytes]", k: QueueKeys, names: Dict[str, int],
           alive_ms: int) -> None:
    """Subscribers as this layout keeps them: cursor ``names[name]``, subscribed at 0."""
    admin.hset(k.broadcast("cursors"), mapping=names)  # type: ignore[arg-type]
    admin.hset(k.broadcast("seen"), mapping={name: alive_ms for name in names})
    admin.zadd(k.broadcast("places"), names)  # type: ignore[arg-type]
    admin.zadd(k.broadcast("since"), {name: 0 for name in names})
    admin.zadd(k.broadcast("alive"), {name: alive_ms for name in names})


def _old_heartbeat(admin: "redis.Redis[bytes]", k: QueueKeys, name: str, now_ms: int) -> None:
    """What the previous version (b47a35c) wrote to say a subscriber is alive, in its
    heartbeat (``BroadcastStore.seen``: ``pipe.hset(key, subscriber, now_ms)``) and in
    each pull (``HSET KEYS[6] name now``): the seen hash, nothing else."""
    admin.hset(k.broadcast("seen"), name, now_ms)


# -- H1: a worker of the previous version -----------------------------------------

def test_a_live_worker_of_the_previous_version_is_not_pruned(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """40 subscribers indexed two hours ago (alive's score) whose previous-version
    workers renewed seen a moment ago: no send prunes them; each indexes at most 16
    of them again (alive takes seen's time), and one truly gone is pruned."""
    app, tick = _app(redis_server, "h1", broadcast_ttl=3600.0)
    k = QueueKeys("h1", QUEUE)
    try:
        two_hours_ago = _now_ms() - 7_200_000
        olds = {f"old{i}": 0 for i in range(40)}
        _index(admin, k, {**olds, "gone": 0}, two_hours_ago)
        for name in olds:
            _old_heartbeat(admin, k, name, _now_ms())
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        stale = [admin.zcount(k.broadcast("alive"), "-inf", two_hours_ago)]
        for n in range(3):
            tick.delay(n)
            stale.append(admin.zcount(k.broadcast("alive"), "-inf", two_hours_ago))
        # bounded: 16 looked at a call (the first also pruned 'gone')
        assert stale == [41, 41 - 16, 41 - 32, 0]
        names = {s.name for s in app.subscribers(QUEUE)}
        assert names == {*olds, "live"}
        assert admin.hlen(k.broadcast("cursors")) == 41
        assert admin.zcard(k.broadcast("places")) == 41
        # they still get every call: none was dropped as pulled
        assert app.broker.broadcasts.log_size(QUEUE) == 3
    finally:
        app.close()


# -- M1: the previous layout's cursors, indexed -----------------------------------

def test_equal_counts_do_not_hide_a_cursor_the_index_lacks(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """The index holds 'zombie' (the previous version unsubscribed it from the hash
    only; its cursor was past the calls below) and not 'old' (it subscribed with the
    previous version): two names each, yet 'old' is missing. Its calls are kept until
    it pulls them."""
    app, tick = _app(redis_server, "m1a")
    k = QueueKeys("m1a", QUEUE)
    try:
        _index(admin, k, {"live": 0, "zombie": 3}, _now_ms())
        admin.hdel(k.broadcast("cursors"), "zombie")  # the previous unsubscribe
        admin.hdel(k.broadcast("seen"), "zombie")
        admin.hset(k.broadcast("cursors"), "old", 0)  # the previous subscribe
        _old_heartbeat(admin, k, "old", _now_ms())
        handles = [tick.delay(n) for n in range(3)]
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert [h.join(timeout=10, subscribers=["live"]) for h in handles] == [
            {"live": 0}, {"live": 1}, {"live": 2}]
        assert app.broker.broadcasts.log_size(QUEUE) == 3  # 'old' has pulled none
        assert admin.zscore(k.broadcast("places"), "old") == 0
        app.worker(queues=[QUEUE], burst=True, subscriber="old").run()
        assert [h.join(timeout=10, subscribers=["old"]) for h in handles] == [
            {"old": 0}, {"old": 1}, {"old": 2}]
        assert app.broker.broadcasts.log_size(QUEUE) == 0
    finally:
        app.close()


def _hscans(admin: "redis.Redis[bytes]") -> int:
    return int(admin.info("commandstats").get("cmdstat_hscan", {}).get("calls", 0))


def test_an_index_that_can_never_match_the_hash_is_not_scanned_for_ever(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """bcast:places holds another type (someone's string): its count never reaches
    the hash's. No call scans the hash for it again and again; every call is kept
    (the least cursor cannot be told) and still runs."""
    app, tick = _app(redis_server, "m1b")
    k = QueueKeys("m1b", QUEUE)
    try:
        admin.hset(k.broadcast("cursors"), mapping={f"sub{i}": 0 for i in range(500)})
        admin.set(k.broadcast("places"), "someone's")
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        admin.config_resetstat()
        handles = [tick.delay(n) for n in range(3)]
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert _hscans(admin) == 0
        assert [h.join(timeout=10, subscribers=["live"])["live"] for h in handles] == [0, 1, 2]
        assert app.broker.broadcasts.log_size(QUEUE) == 3
    finally:
        app.close()


def test_a_whole_scan_ends_the_indexing_and_a_new_cursor_starts_another(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """450 cursors of the previous layout: three scripts' scans (200 each) index them,
    then none scans; a cursor the previous version adds later (more fields than the
    index) starts a scan again."""
    app, tick = _app(redis_server, "m1c")
    k = QueueKeys("m1c", QUEUE)
    store = app.broker.broadcasts
    try:
        admin.hset(k.broadcast("cursors"), mapping={f"sub{i}": 0 for i in range(450)})
        for _ in range(4):
            store.subscribe(QUEUE, "live", _now_ms())
        assert admin.hget(k.broadcast("state"), "indexed") == b"1"
        assert admin.zcard(k.broadcast("places")) == 451
        admin.config_resetstat()
        for _ in range(3):
            store.subscribe(QUEUE, "live", _now_ms())
        assert _hscans(admin) == 0
        admin.hset(k.broadcast("cursors"), "late", 0)  # the previous subscribe
        store.subscribe(QUEUE, "live", _now_ms())
        assert admin.zscore(k.broadcast("places"), "late") == 0
        tick.delay(1)
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert store.log_size(QUEUE) == 1  # late (and the others) have not pulled it
    finally:
        app.close()


def test_a_scan_cursor_of_another_s_in_state_starts_the_scan_again(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """state's scan holds text HSCAN refuses: the scan starts again from 0 instead of
    failing every pull, send and subscribe."""
    app, tick = _app(redis_server, "scan")
    k = QueueKeys("scan", QUEUE)
    try:
        admin.hset(k.broadcast("cursors"), mapping={f"sub{i}": 0 for i in range(10)})
        admin.hset(k.broadcast("state"), "scan", "not a cursor")
        assert app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        assert admin.zcard(k.broadcast("places")) == 11
        handle = tick.delay(3)
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert handle.join(timeout=10, subscribers=["live"]) == {"live": 3}
    finally:
        app.close()


# -- M2: the prune's clock and ttl -------------------------------------------------

def test_a_sender_whose_clock_runs_an_hour_ahead_prunes_nobody_alive(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, tick = _app(redis_server, "m2a", broadcast_ttl=900.0, clock=_Ahead(3600))
    k = QueueKeys("m2a", QUEUE)
    try:
        _index(admin, k, {f"sub{i}": 0 for i in range(20)}, _now_ms())
        for n in range(3):
            tick.delay(n)
        assert admin.hlen(k.broadcast("cursors")) == 20
        assert admin.zcard(k.broadcast("alive")) == 20
        assert app.broker.broadcasts.log_size(QUEUE) == 3
    finally:
        app.close()


def test_a_puller_whose_clock_runs_an_hour_ahead_prunes_nobody_alive(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    sender, tick = _app(redis_server, "m2b", broadcast_ttl=900.0)
    ahead, _ = _app(redis_server, "m2b", broadcast_ttl=900.0, clock=_Ahead(3600))
    k = QueueKeys("m2b", QUEUE)
    try:
        _index(admin, k, {f"sub{i}": 0 for i in range(20)}, _now_ms())
        tick.delay(1)
        ahead.worker(queues=[QUEUE], burst=True, subscriber="sub0").run()
        assert admin.hlen(k.broadcast("cursors")) == 20
        assert admin.zcard(k.broadcast("alive")) == 20
    finally:
        sender.close()
        ahead.close()


def test_a_short_broadcast_ttl_from_one_app_does_not_prune_the_others_subscribers(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """Subscribers seen 30 minutes ago, of a queue whose senders say broadcast_ttl is
    an hour: an app that says 1 s (a unit mistake) prunes none of them, neither in
    its sends nor in the pulls after (which go by the longest ttl given)."""
    normal, tick = _app(redis_server, "m2c", broadcast_ttl=3600.0)
    hasty, hasty_tick = _app(redis_server, "m2c", broadcast_ttl=1.0)
    k = QueueKeys("m2c", QUEUE)
    try:
        half_an_hour_ago = _now_ms() - 1_800_000
        _index(admin, k, {f"sub{i}": 0 for i in range(20)}, half_an_hour_ago)
        tick.delay(0)
        hasty_tick.delay(1)
        hasty.worker(queues=[QUEUE], burst=True, subscriber="sub0").run()
        assert admin.hlen(k.broadcast("cursors")) == 20
        assert admin.zcard(k.broadcast("alive")) == 20
    finally:
        normal.close()
        hasty.close()


def test_a_short_broadcast_ttl_alone_still_waits_ten_minutes(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """broadcast_ttl=1 s and nobody else's: a subscriber seen 5 minutes ago stays (the
    floor is 10 minutes), one seen 20 minutes ago is pruned."""
    app, tick = _app(redis_server, "m2d", broadcast_ttl=1.0)
    k = QueueKeys("m2d", QUEUE)
    try:
        _index(admin, k, {"recent": 0}, _now_ms() - 300_000)
        _index(admin, k, {"away": 0}, _now_ms() - 1_200_000)
        tick.delay(0)
        assert admin.hkeys(k.broadcast("cursors")) == [b"recent"]
    finally:
        app.close()


# -- M4: every key a script touches is in KEYS ------------------------------------

#: Put in front of a script: redis.call and redis.pcall refuse a key not in KEYS
#: (the first argument of every command the broadcast scripts run, but TIME's).
_CHECKED = """
local declared_keys, real_redis = {}, redis
for _, key in ipairs(KEYS) do declared_keys[key] = true end
local function declared_only(command, key)
  if string.upper(command) ~= 'TIME' and not declared_keys[key] then
    error('UNDECLARED ' .. command .. ' on key ' .. tostring(key), 0)
  end
end
local function checked_call(command, ...)
  declared_only(command, ...)
  return real_redis.call(command, ...)
end
local function checked_pcall(command, ...)
  declared_only(command, ...)
  return real_redis.pcall(command, ...)
end
local redis = setmetatable({call = checked_call, pcall = checked_pcall}, {__index = real_redis})
"""


def _checked(app: Minitask) -> None:
    """Run the app's broadcast scripts with the key check in front."""
    for name in BroadcastStore.scripts:
        app.broker.transport.register(name, _CHECKED + source(name, shared="broadcast_lib"))


def test_the_check_refuses_an_undeclared_key(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    app, _ = _app(redis_server, "check")
    try:
        app.broker.transport.register(
            "broadcast_wake", _CHECKED + "return redis.call('LLEN', 'minitask:{check:hard}:x')")
        with pytest.raises(BrokerError, match="UNDECLARED LLEN on key minitask:{check:hard}:x"):
            app.broker.transport.run("broadcast_wake", ["minitask:{check:hard}:y"], (),
                                     "check")
    finally:
        app.close()


def test_no_broadcast_script_touches_a_key_it_was_not_given(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """40 subscribers (s0 the oldest), migration, sends, the wake tree, a prune and an
    unsubscribe, every script refusing a key not in its KEYS. A send wakes the 16
    newest, the newest's pull its 16 children; the first time through the lanes a
    script could not name are woken by broadcast_wake, then each call names them."""
    app, tick = _app(redis_server, "m4", broadcast_ttl=3600.0)
    _checked(app)
    store = app.broker.broadcasts
    k = QueueKeys("m4", QUEUE)
    follow_ups: List[List[str]] = []
    run: Callable[..., Any] = app.broker.transport.run

    def recording(name: str, keys: Any, *args: Any, **kwargs: Any) -> Any:
        if name == "broadcast_wake":
            follow_ups.append(list(keys))
        return run(name, keys, *args, **kwargs)

    app.broker.transport.run = recording  # type: ignore[method-assign]
    try:
        admin.hset(k.broadcast("cursors"), "older", 0)  # the previous layout's
        _index(admin, k, {"stale": 0}, _now_ms() - 7_200_000)
        for i in range(40):
            admin.hset(k.broadcast("state"), "seq", i)
            store.subscribe(QUEUE, f"s{i}", _now_ms())

        def woken() -> List[int]:
            found = [i for i in range(40)
                     if admin.llen(QueueKeys("m4", lane(QUEUE, f"s{i}")).wake)]
            for i in range(40):
                admin.delete(QueueKeys("m4", lane(QUEUE, f"s{i}")).wake)
            return found

        tick.delay(1)  # the first send knows nobody to wake: all 16 in a follow-up
        assert woken() == list(range(24, 40)) and len(follow_ups) == 1
        assert admin.hlen(k.broadcast("cursors")) == 41  # 'stale' pruned
        tick.delay(2)  # now named: no follow-up
        assert woken() == list(range(24, 40)) and len(follow_ups) == 1

        def pull() -> int:
            reply = app.broker.transport.run_calls(
                [store.pull_call(QUEUE, "s39", 10, _now_ms())], "pull")[0]
            pulled = store.pulled(reply)
            store.woken(QUEUE, "s39", pulled.woken, pulled.missed, pulled.pulled)
            return pulled.pulled

        assert pull() == 2  # its children through a follow-up; its own lane: calls wait
        assert woken() == [*range(8, 24), 39] and len(follow_ups) == 2
        tick.delay(3)
        assert woken() == list(range(24, 40))
        assert pull() == 1
        assert woken() == [*range(8, 24), 39] and len(follow_ups) == 2
        assert store.unsubscribe(QUEUE, "s0")
    finally:
        app.close()


# -- lows found reviewing the rest -------------------------------------------------

def test_a_call_s_subscribers_include_cursors_not_indexed_while_counts_agree(
        redis_server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    """450 cursors of the previous layout and 450 index entries of names it has
    unsubscribed since (equal counts): until the scan has indexed them all,
    subscribers() reads the cursors hash too, so join() waits for every one."""
    app, tick = _app(redis_server, "names")
    k = QueueKeys("names", QUEUE)
    try:
        olds = {f"old{i}": 0 for i in range(450)}
        admin.hset(k.broadcast("cursors"), mapping=olds)  # type: ignore[arg-type]
        for part in ("places", "since"):
            admin.zadd(k.broadcast(part), {f"gone{i}": 0 for i in range(450)})
        admin.zadd(k.broadcast("alive"), {f"gone{i}": _now_ms() for i in range(450)})
        handle = tick.delay(1)  # its script indexes 200 of the 450
        assert admin.hget(k.broadcast("state"), "indexed") is None
        assert set(olds) <= set(handle.subscribers())
    finally:
        app.close()


@pytest.mark.parametrize("part", ["joins", "cursors", "since"])
def test_a_join_reader_ignores_another_s_key_and_names_it(
        redis_server: RedisServer, admin: "redis.Redis[bytes]", part: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 29 section 1 (probe29r M2): read tolerantly, said once naming the key;
    no longer refused (a refusal broke join() and status() of every call)."""
    app, tick = _app(redis_server, "named")
    k = QueueKeys("named", QUEUE)
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        handle = tick.delay(1)
        admin.delete(k.broadcast(part))
        admin.set(k.broadcast(part), "someone's")
        with caplog.at_level(logging.WARNING):
            if part == "since":  # who the call went to: every cursor, as for an older's
                assert handle.subscribers() == ["live"]
            else:  # who ran it: none can be told
                assert app.broker.broadcasts.passed(QUEUE, handle.id, ["live"]) == []
        assert any(k.broadcast(part) in r.getMessage() for r in caplog.records)
    finally:
        app.close()


def test_a_wake_up_that_fails_does_not_fail_the_send(
        redis_server: RedisServer, admin: "redis.Redis[bytes]",
        caplog: pytest.LogCaptureFixture) -> None:
    """The first send knows nobody to wake: the lanes are woken by broadcast_wake,
    a hint. Redis refusing it is logged; the call is sent all the same."""
    app, tick = _app(redis_server, "hint")
    run: Callable[..., Any] = app.broker.transport.run

    def refusing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "broadcast_wake":
            raise BrokerError("refused, as a test")
        return run(name, *args, **kwargs)

    app.broker.transport.run = refusing  # type: ignore[method-assign]
    try:
        app.broker.broadcasts.subscribe(QUEUE, "live", _now_ms())
        handle = tick.delay(4)
        assert "could not wake 1 subscriber(s) of queue 'hard'" in caplog.text
        app.worker(queues=[QUEUE], burst=True, subscriber="live").run()
        assert handle.join(timeout=10) == {"live": 4}
    finally:
        app.close()
