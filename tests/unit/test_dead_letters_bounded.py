"""A queue's dead letters are bounded (``dead_letters_max``, ``dead_letters_ttl``): as a
task joins them, bury.lua deletes the oldest over the cap and those older than the ttl,
at most TRIM_MOST a call, each with everything a purge deletes, and counts them in
``dead_trimmed``; nothing else is touched."""
from __future__ import annotations

import logging
from typing import Any, List

import pytest

from minitask import ConfigurationError, Minitask
from minitask.admin import queue_counts
from minitask.broker.keys import queue_keys
from minitask.stores.dead import TRIM_MOST, DeadBounds
from minitask.wire.message import Outcome

NOW_MS = 1_800_000_000_000


def _app(fake_redis: Any, clock: Any, **options: Any) -> Minitask:
    return Minitask("bounded", broker=fake_redis, clock=clock, **options)


def _plant_dead(app: Minitask, count: int, start_ms: int, prefix: str = "d") -> List[bytes]:
    """``count`` dead letters, one a millisecond from ``start_ms`` (oldest first), each
    with its reason, message and flow spec, as bury.lua writes them."""
    k = queue_keys(app.name, "default")
    client = app.broker.client
    ids = [f"{prefix}{n:04d}".encode() for n in range(count)]
    pipe = client.pipeline(transaction=False)
    for n, task_id in enumerate(ids):
        pipe.zadd(k.dead, {task_id: start_ms + n})
        pipe.hset(k.dead_info, task_id, b"why")
        pipe.hset(k.messages, task_id, b"body")
        pipe.hset(k.flow_dead, task_id, b"spec")
    pipe.execute()
    return ids


def _bury(app: Minitask, task_id: str, now_ms: int = NOW_MS) -> Any:
    """Lease ``task_id`` and dead-letter it: how many dead letters its bounds deleted."""
    k = queue_keys(app.name, "default")
    app.broker.client.zadd(k.leases, {task_id: (now_ms + 30_000) * 10 + 4})
    app.broker.client.hset(k.messages, task_id, b"its body")
    outcome = Outcome("failed", now_ms, exc_type="ValueError", message="no")
    buried = app.broker.results.bury("default", task_id, outcome=outcome,
                                     result_ttl_ms=60_000)
    assert buried
    return buried.deleted


def _gone(app: Minitask, task_id: bytes) -> bool:
    k = queue_keys(app.name, "default")
    client = app.broker.client
    return (client.zscore(k.dead, task_id) is None and not client.hexists(k.dead_info, task_id)
            and not client.hexists(k.messages, task_id)
            and not client.hexists(k.flow_dead, task_id))


def _whole(app: Minitask, task_id: bytes) -> bool:
    k = queue_keys(app.name, "default")
    client = app.broker.client
    return (client.zscore(k.dead, task_id) is not None
            and client.hget(k.dead_info, task_id) == b"why"
            and client.hget(k.messages, task_id) == b"body"
            and client.hget(k.flow_dead, task_id) == b"spec")


def test_the_oldest_over_the_cap_go_with_everything_a_purge_deletes(
        fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_max=5, dead_letters_ttl=None)
    planted = _plant_dead(app, 10, NOW_MS - 10_000)
    k = queue_keys(app.name, "default")
    fake_redis.hset(k.messages, "live", b"a queued task's message")
    fake_redis.hset(k.flow, "live", b"its spec")
    assert _bury(app, "new") == 6  # five kept, the new one among them
    assert all(_gone(app, task_id) for task_id in planted[:6])
    assert all(_whole(app, task_id) for task_id in planted[6:])
    assert fake_redis.zcard(k.dead) == 5 and fake_redis.zscore(k.dead, "new") == NOW_MS
    assert fake_redis.hget(k.messages, "new") == b"its body"
    assert fake_redis.hget(k.messages, "live") == b"a queued task's message"
    assert fake_redis.hget(k.flow, "live") == b"its spec"
    assert fake_redis.get(k.dead_trimmed) == b"6"
    assert app.broker.dead.trimmed_many(["default"]) == {"default": 6}
    assert queue_counts(app, "default")["dead_trimmed"] == 6
    assert _bury(app, "newer", NOW_MS + 1) == 1
    assert fake_redis.get(k.dead_trimmed) == b"7"
    assert [m for m in fake_redis.zrange(k.dead, 0, -1)] == [*planted[7:], b"new", b"newer"]


def test_under_the_bounds_nothing_goes_and_nothing_is_counted(
        fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_max=5)
    planted = _plant_dead(app, 4, NOW_MS - 10_000)
    assert _bury(app, "new") == 0
    k = queue_keys(app.name, "default")
    assert all(_whole(app, task_id) for task_id in planted)
    assert fake_redis.exists(k.dead_trimmed) == 0
    assert "dead_trimmed" not in queue_counts(app, "default")
    assert app.broker.dead.trimmed_many(["default"]) == {"default": 0}


def test_those_older_than_the_ttl_go_whatever_the_cap(fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_ttl=60)
    old = _plant_dead(app, 3, NOW_MS - 61_000, "old")
    young = _plant_dead(app, 3, NOW_MS - 60_000, "young")  # exactly 60 s: kept
    assert _bury(app, "new") == 3
    assert all(_gone(app, task_id) for task_id in old)
    assert all(_whole(app, task_id) for task_id in young)
    assert fake_redis.get(queue_keys(app.name, "default").dead_trimmed) == b"3"


def test_no_ttl_keeps_old_letters(fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_ttl=None)
    old = _plant_dead(app, 3, 1000)
    assert _bury(app, "new") == 0
    assert all(_whole(app, task_id) for task_id in old)


def test_a_call_deletes_at_most_trim_most_and_a_lowered_cap_converges(
        fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_max=10)
    planted = _plant_dead(app, 250, NOW_MS - 100_000)
    k = queue_keys(app.name, "default")
    assert TRIM_MOST == 100
    assert _bury(app, "a") == 100
    assert fake_redis.zcard(k.dead) == 151
    assert all(_gone(app, task_id) for task_id in planted[:100])
    assert _whole(app, planted[100])
    assert _bury(app, "b") == 100
    assert _bury(app, "c") == 43
    assert fake_redis.zcard(k.dead) == 10
    assert _bury(app, "d") == 1
    assert fake_redis.get(k.dead_trimmed) == b"244"
    assert fake_redis.hlen(k.dead_info) == fake_redis.hlen(k.flow_dead) + 4 == 10


def test_the_buried_task_itself_is_never_deleted(fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_max=2)
    _plant_dead(app, 2, NOW_MS - 10_000)
    k = queue_keys(app.name, "default")
    fake_redis.zadd(k.dead, {"new": 1})  # planted: the oldest entry is the id buried
    assert _bury(app, "new") == 1
    assert fake_redis.hget(k.messages, "new") == b"its body"
    assert fake_redis.zscore(k.dead, "new") == NOW_MS


@pytest.mark.parametrize("planted", ["text", "overflow", "list"])
def test_a_count_no_minitask_wrote_starts_afresh(fake_redis: Any, clock: Any,
                                                 planted: str) -> None:
    app = _app(fake_redis, clock, dead_letters_max=1)
    k = queue_keys(app.name, "default")
    {"text": lambda: fake_redis.set(k.dead_trimmed, b"many"),
     "overflow": lambda: fake_redis.set(k.dead_trimmed, str(2 ** 63 - 1)),
     "list": lambda: fake_redis.rpush(k.dead_trimmed, b"x")}[planted]()
    old = _plant_dead(app, 2, NOW_MS - 10_000)
    assert _bury(app, "new") == 2
    assert all(_gone(app, task_id) for task_id in old)
    assert fake_redis.get(k.dead_trimmed) == b"2"
    if planted == "list":
        assert fake_redis.lrange(k.dead_trimmed + ":foreign", 0, -1) == [b"x"]


def test_a_messages_key_of_another_type_does_not_stop_the_bury(
        fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_max=1)
    k = queue_keys(app.name, "default")
    fake_redis.zadd(k.dead, {"old": 1})
    fake_redis.set(k.messages, b"someone's")
    fake_redis.zadd(k.leases, {"new": (NOW_MS + 30_000) * 10 + 4})
    outcome = Outcome("failed", NOW_MS, exc_type="ValueError", message="no")
    assert app.broker.results.bury("default", "new", outcome=outcome,
                                   result_ttl_ms=0).deleted == 1
    assert fake_redis.zrange(k.dead, 0, -1) == [b"new"]
    assert fake_redis.get(k.messages) == b"someone's"


def test_a_worker_says_once_that_a_bury_deleted_dead_letters(
        fake_redis: Any, clock: Any, caplog: pytest.LogCaptureFixture) -> None:
    app = _app(fake_redis, clock, dead_letters_max=3)

    @app.task(name="fails")
    def fails() -> None:
        raise ValueError("no")

    _plant_dead(app, 4, clock.now_ms() - 10_000)
    fails.delay()
    with caplog.at_level(logging.WARNING, logger="minitask.worker.outcomes"):
        assert app.worker().run_once()
    said = [r.getMessage() for r in caplog.records if "dead_letters_max" in r.getMessage()]
    assert said == ["queue 'default': 2 oldest dead letter(s) deleted as tasks joined them "
                    "since the last such line (at most one a minute), past "
                    "dead_letters_max=3 or dead_letters_ttl=15,552,000 s (minitask status "
                    "counts them)"]
    assert len(app.dead_letters()) == 3


@pytest.mark.parametrize("options", [
    {"dead_letters_max": 0}, {"dead_letters_max": True}, {"dead_letters_max": "5"},
    {"dead_letters_max": 10 ** 9}, {"dead_letters_max": None},
    {"dead_letters_ttl": 0}, {"dead_letters_ttl": -1}, {"dead_letters_ttl": "1d"},
    {"dead_letters_ttl": float("nan")}, {"dead_letters_ttl": float("inf")},
    {"dead_letters_ttl": True}])
def test_bounds_that_bound_nothing_are_refused(options: Any) -> None:
    name = next(iter(options))
    with pytest.raises(ConfigurationError, match=f"app 'x': {name} must be"):
        Minitask("x", broker="redis://127.0.0.1:1/0", **options)


def test_the_defaults_are_sidekiqs() -> None:
    app = Minitask("x", broker="redis://127.0.0.1:1/0")
    assert app.dead_bounds == DeadBounds(10_000, 180 * 86400.0)
    assert app.dead_bounds.ttl_ms == 180 * 86_400_000
    app = Minitask("x", broker="redis://127.0.0.1:1/0", dead_letters_ttl=None,
                   dead_letters_max=7)
    assert (app.dead_bounds.most, app.dead_bounds.ttl, app.dead_bounds.ttl_ms) == (7, None, 0)
    assert Minitask("x", broker="redis://127.0.0.1:1/0",
                    dead_letters_ttl=0.0001).dead_bounds.ttl_ms == 1  # never "no limit"


def test_a_task_not_leased_here_is_not_buried_and_nothing_is_deleted(
        fake_redis: Any, clock: Any) -> None:
    app = _app(fake_redis, clock, dead_letters_max=1)
    planted = _plant_dead(app, 3, NOW_MS - 10_000)
    outcome = Outcome("failed", NOW_MS, exc_type="ValueError", message="no")
    buried = app.broker.results.bury("default", "elsewhere", outcome=outcome, result_ttl_ms=0)
    assert not buried and buried.deleted == 0
    assert all(_whole(app, task_id) for task_id in planted)
