"""A refusal of the whole server is no queue's bad data: a real worker on a real
redis-server that refuses writes for want of replicas (``min-replicas-to-write 1``)
sets no queue aside, names no key to inspect, and runs the tasks of each queue once
Redis writes again.

Before (review 11, F4), any error inside a script counted as the queue's own data:
NOREPLICAS raised by fetch.lua set each queue aside in turn, "inspect the key named".
"""
from __future__ import annotations

import signal
import time

import pytest

from minitask.broker.refusals import broker_reason
from tests.support.crash_kit import DEADLINE, Kit
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

#: Long enough for the worker to meet the refusal in several fetches and waits.
REFUSING = 6.0


def test_noreplicas_sets_no_queue_aside(kit: Kit) -> None:
    log = kit.logs / "worker-0.log"
    worker = kit.worker("--pool", "thread", "-c", "1", "-Q", "a,b")
    record = kit.tasks.record
    assert record.apply_async(("warm",), queue="a").get(timeout=DEADLINE) == "warm"
    started = len(log.read_text(errors="replace"))
    handles = [record.apply_async(("in-a",), queue="a", delay=1),
               record.apply_async(("in-b",), queue="b", delay=1)]
    kit.client.config_set("min-replicas-to-write", 1)
    try:
        wait_until(lambda: "NOREPLICAS" in log.read_text(errors="replace")[started:],
                   timeout=DEADLINE, message="the worker met the refusal")
        time.sleep(REFUSING)
    finally:
        kit.client.config_set("min-replicas-to-write", 0)
    assert [h.get(timeout=DEADLINE) for h in handles] == ["in-a", "in-b"]
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=DEADLINE) == 0
    text = log.read_text(errors="replace")[started:]
    assert "set aside" not in text and "inspect the key" not in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


@pytest.mark.parametrize("text", [
    "NOREPLICAS Not enough good replicas to write. script: 36aa, on @user_script:38.",
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
    "persist to disk. script: 1, on @user_script:9.",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'. "
    "script: 1, on @user_script:9.",
])
def test_a_whole_server_refusal_in_a_script_is_no_script_error(text: str) -> None:
    from redis.exceptions import ResponseError
    reason, hint = broker_reason(ResponseError(text), "fetch", ["zadd"])
    assert reason == "error" and "inspect the key" not in hint, (reason, hint)


def test_a_script_denied_a_key_by_an_acl_is_a_permission_error() -> None:
    from redis.exceptions import ResponseError
    error = ResponseError("The user executing the script can't access at least one of the "
                          "keys mentioned in the command script: 1, on @user_script:9.")
    assert broker_reason(error, "fetch", ["zadd"])[0] == "permission"
