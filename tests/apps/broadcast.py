"""An app for broadcast tests with real worker processes; the broker comes from
MINITASK_BROKER_URL, the subscriber a worker runs as from TEST_SUBSCRIBER (the
tests start each worker with the same ``--name``).

Tasks record what they did in Redis (``marks:<subscriber>``, entries
``n:pid:attempt:delivery``) so tests assert on Redis, never on logs.
``producer(broker)`` builds the same app on the test's side, for sending.
"""
from __future__ import annotations

import os
import time
from typing import Any, Union

import redis

from minitask import Minitask, current_task

QUEUE = "fan"


def build(broker: "Union[str, redis.Redis[bytes], None]" = None) -> Minitask:
    return Minitask("bcast", broker=broker,
                    visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30")))


app = build()


def _note(kind: str, n: int) -> None:
    context = current_task()
    assert context is not None
    subscriber = os.environ.get("TEST_SUBSCRIBER", "?")
    with redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]) as client:
        client.rpush(f"marks:{kind}:{subscriber}",
                     f"{n}:{os.getpid()}:{context.attempt}:{context.delivery}")


def note(n: int) -> int:
    """Record the run, return ``n`` (tells apart the subscribers' order)."""
    _note("note", n)
    return n


def hold(n: int) -> str:
    """Record the start, run for TEST_HOLD seconds (a run to SIGKILL), record the end."""
    _note("started", n)
    time.sleep(float(os.environ.get("TEST_HOLD", "0")))
    _note("ended", n)
    return os.environ.get("TEST_SUBSCRIBER", "?")


def register(target: Minitask) -> Any:
    """The broadcast tasks, on ``target`` (the worker's app or a producer's)."""
    return (target.task(broadcast=True, queue=QUEUE, name="bcast.note")(note),
            target.task(broadcast=True, queue=QUEUE, name="bcast.hold")(hold))


register(app)


def producer(broker: "Union[str, redis.Redis[bytes]]") -> Any:
    """A producer-side app of the same name, and its two tasks."""
    side = build(broker)
    return (side, *register(side))
