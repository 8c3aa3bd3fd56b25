"""An app whose results live a second, for the tests that a chord's body runs however
long its members wait in the queue (tests/integration/test_chord_outlives_result_ttl.py);
the broker comes from MINITASK_BROKER_URL.

Its tasks note what they did in Redis (``marks:<key>``), so tests assert on Redis."""
from __future__ import annotations

import json
import os
from typing import Any, List

import redis

from minitask import Minitask

#: Seconds every result (and the workflow state that lived as long) is kept.
RESULT_TTL = 1.0


def _note(key: str, value: str) -> None:
    with redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]) as client:
        client.rpush(f"marks:{key}", value)


def build(broker: Any = None) -> Minitask:
    """The app, on ``broker`` (None: MINITASK_BROKER_URL): the tests build it too."""
    made = Minitask("late", broker=broker, result_ttl=RESULT_TTL)

    @made.task(name="late.member")
    def member(value: int) -> int:
        return value

    @made.task(name="late.far_member", queue="far")
    def far_member(value: int) -> int:
        return value

    @made.task(name="late.boom", retries=0)
    def boom(value: int) -> int:
        raise ValueError(f"boom {value}")

    @made.task(name="late.received")
    def received(values: List[int], tag: str) -> int:
        """A chord's body: notes the results it received, as JSON, under its tag."""
        _note(f"received:{tag}", json.dumps(values))
        return len(values)

    return made


app = build()
