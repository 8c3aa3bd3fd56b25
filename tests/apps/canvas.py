"""An app for workflow tests with real worker processes; the broker comes from
MINITASK_BROKER_URL, the app name from TEST_APP (default ``canvas``).

Tasks record what they did in Redis (on the broker's server, or on
TEST_MARKS_URL when given: a cluster test keeps its markers on a plain server)
so tests assert on Redis, never on logs. ``producer(broker)`` builds the same
app on the test's side, for sending.
"""
from __future__ import annotations

import json
import os
import random
import time
from typing import Any, List, Optional, Union

import redis

from minitask import Minitask, Retry, current_task

NAME = os.environ.get("TEST_APP", "canvas")


def _visibility() -> float:
    return float(os.environ.get("TEST_VISIBILITY", "30"))


app = Minitask(NAME, visibility_timeout=_visibility())


def _marks() -> "redis.Redis[bytes]":
    return redis.Redis.from_url(os.environ.get("TEST_MARKS_URL")
                                or os.environ["MINITASK_BROKER_URL"])


def _note(key: str, value: str) -> None:
    with _marks() as client:
        client.rpush(f"marks:{key}", value)


def _where() -> str:
    context = current_task()
    assert context is not None
    return f"{context.id}:{context.attempt}:{context.delivery}:{os.getpid()}"


def add(x: int, y: int) -> int:
    return x + y


def mul(x: int, y: int) -> int:
    return x * y


def total(values: List[int], tag: str = "") -> int:
    """A chord body: records each run (task id, attempt, delivery, pid) under its tag."""
    if tag:
        _note(f"body:{tag}", _where())
    return sum(values)


def received(values: List[int], tag: str) -> int:
    """A chord body that records the values it received, as JSON, under its tag."""
    _note(f"received:{tag}", json.dumps(values))
    return len(values)


def member(key: str, value: int, pause: float = 0.0, retry_chance: float = 0.0,
           mark: bool = False) -> int:
    """A chord member: may ask for one retry (by chance), may take a while, may leave
    a marker (``marks:member``) when it is done."""
    context = current_task()
    assert context is not None
    if context.attempt == 1 and random.random() < retry_chance:
        raise Retry(delay=0.01)
    if pause:
        time.sleep(pause)
    if mark:
        _note("member", f"{key}:{_where()}")
    return value


def boom(x: Any) -> None:
    raise ValueError(f"boom {x}")


def report(failed_id: str, tag: str) -> None:
    _note(f"errors:{tag}", failed_id)


def _register(target: Minitask) -> None:
    target.task(name="canvas.add")(add)
    target.task(name="canvas.mul", queue="other")(mul)
    target.task(name="canvas.total")(total)
    target.task(name="canvas.received")(received)
    target.task(name="canvas.member", retries=3, retry_backoff=0.01)(member)
    target.task(name="canvas.far_member", queue="far", retries=3,
                retry_backoff=0.01)(member)
    target.task(name="canvas.boom")(boom)
    target.task(name="canvas.report")(report)


_register(app)


def producer(broker: "Union[str, redis.Redis[bytes], Any]",
             name: Optional[str] = None) -> Minitask:
    """The same app on the test's side (its tasks never run there)."""
    made = Minitask(name or NAME, broker=broker, visibility_timeout=_visibility())
    _register(made)
    return made
