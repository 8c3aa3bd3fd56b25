"""Durability settings, the commands behind a confirmed batch, and the errors
(guide/durability). The waits themselves run against real replicas in
tests/integration/test_durability_waits.py and tests/scale/test_durability.py."""
from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from minitask import BrokerError, ConfigurationError, DurabilityError, Minitask
from minitask.broker.durability import (APP, CONFIRMED_SCRIPTS, Durability, name_task,
                                        needs_confirmation)
from minitask.broker.keys import confirm_key, queue_keys


@pytest.mark.parametrize("mode, replicas, timeout, option", [
    ("sync", 1, 1.0, "durability"), (True, 1, 1.0, "durability"),
    ("replicated", 0, 1.0, "min_replicas"), ("replicated", 1.5, 1.0, "min_replicas"),
    ("replicated", True, 1.0, "min_replicas"), ("replicated", 1, 0, "durability_timeout"),
    ("replicated", 1, -2.0, "durability_timeout"),
    ("replicated", 1, float("inf"), "durability_timeout"),
    ("replicated", 1, float("nan"), "durability_timeout"),
    ("replicated", 1, "1", "durability_timeout")])
def test_a_bad_setting_is_a_value_error_naming_the_option(
        mode: object, replicas: object, timeout: object, option: str) -> None:
    with pytest.raises(ValueError, match=option):
        Minitask("shop", broker=redis.Redis(), durability=mode, min_replicas=replicas,
                 durability_timeout=timeout)


def test_a_bad_per_call_durability_writes_nothing(fake_redis: "redis.Redis[bytes]") -> None:
    app = Minitask("shop", broker=fake_redis)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b
    with pytest.raises(ConfigurationError, match="durability must be None"):
        add.apply_async((1, 2), durability="durable")
    assert fake_redis.keys("*") == []
    add.apply_async((1, 2), durability=None)  # None is a mode of its own, not the app's
    assert fake_redis.hlen(queue_keys("shop", "default").messages) == 1


def test_a_call_takes_the_apps_replicas_and_timeout_with_its_own_mode() -> None:
    app_setting = Durability.build(None, 2, 0.25, "app 'shop'")
    assert app_setting.for_call(APP, "x") is app_setting
    call = app_setting.for_call("fsync", "x")
    assert (call.mode, call.min_replicas, call.timeout) == ("fsync", 2, 0.25)


def test_the_touch_and_the_wait_follow_in_the_slot_of_the_batch() -> None:
    key = queue_keys("shop", "emails").messages
    touch, wait = Durability("replicated", 2, 0.25).commands(key)
    assert touch == ("SET", confirm_key(key), "1")
    assert key_slot(confirm_key(key).encode()) == key_slot(key.encode())
    assert wait == ("WAIT", 2, 250)
    assert Durability("fsync", 1, 2.0).commands(key)[1] == ("WAITAOF", 1, 1, 2000)
    assert Durability("replicated", 1, 0.0001).timeout_ms == 1  # never WAIT 0


def test_only_writes_that_must_survive_are_confirmed_by_default() -> None:
    assert needs_confirmation(["ack", "fetch"])
    assert not needs_confirmation(["fetch", "release", "promote"])
    assert {"enqueue", "ack", "retry", "bury", "spawn", "schedule_fire"} <= CONFIRMED_SCRIPTS


def test_a_short_confirmation_is_a_durability_error_saying_how_many_confirmed() -> None:
    policy = Durability("replicated", 2, 1.0)
    policy.check(2, "enqueue", "redis://h")
    with pytest.raises(DurabilityError) as caught:
        policy.check(1, "enqueue into queue 'q'", "redis://h")
    assert caught.value.confirmed == 1 and caught.value.task_id is None
    assert isinstance(caught.value, BrokerError) and caught.value.reason == "unconfirmed"
    assert "only 1 of 2 replica(s) confirmed" in str(caught.value)
    fsync = Durability("fsync", 1, 1.0)
    fsync.check([1, 1], "enqueue", "redis://h")
    with pytest.raises(DurabilityError, match="did not fsync"):
        fsync.check([0, 1], "enqueue", "redis://h")
    with pytest.raises(DurabilityError, match="7.2"):  # after the write: made, unconfirmed
        fsync.check(redis.ResponseError("ERR unknown command 'WAITAOF'"), "enqueue", "redis://h")


def test_the_callers_error_names_the_task_its_id_and_how_to_check() -> None:
    error = name_task(DurabilityError("only 0 of 1", task_id=None, confirmed=0), "send", "t-1")
    assert (error.task_id, error.confirmed) == ("t-1", 0)
    for part in ("'send'", "'t-1'", "may or may not be in Redis", "status()", "task_id='t-1'"):
        assert part in str(error)


def test_a_bulk_enqueue_error_says_how_many_were_sent_with_the_named_task() -> None:
    error = name_task(DurabilityError("only 0 of 1", task_id=None, confirmed=0), "send", "t-1",
                      count=3)
    assert "'t-1' (and the 2 other task(s) sent with it)" in str(error)
