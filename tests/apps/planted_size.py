"""An app whose chord's group state a test plants another size in, for
tests/integration/test_chord_planted_size.py; the broker comes from MINITASK_BROKER_URL.

Its tasks note what they did in Redis (``marks:<key>``), so tests assert on Redis."""
from __future__ import annotations

import json
import os
from typing import Any, List

import redis

from minitask import Minitask


def _note(key: str, value: str) -> None:
    with redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]) as client:
        client.rpush(f"marks:{key}", value)


def build(broker: Any = None) -> Minitask:
    """The app, on ``broker`` (None: MINITASK_BROKER_URL): the tests build it too."""
    made = Minitask("sized", broker=broker)

    @made.task(name="sized.member", retries=0)
    def member(value: int) -> int:
        return value

    @made.task(name="sized.received", retries=0)
    def received(values: List[int], tag: str) -> int:
        """A chord's body: notes the results it received, as JSON, under its tag."""
        _note(f"received:{tag}", json.dumps(values))
        return len(values)

    @made.task(name="sized.echo")
    def echo(value: str) -> str:
        return value

    return made


app = build()
