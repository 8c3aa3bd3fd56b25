"""An app for tests/integration/test_schedules_planted_many.py; the broker comes from
MINITASK_BROKER_URL. ``mark`` (queue ``other``) pushes its token on ``marks:other``;
the schedule ``often`` (every second, queue ``timed``) pushes its run's id on
``marks:timed``."""
from __future__ import annotations

import os

import redis

from minitask import Minitask, current_task

app = Minitask("planted")
_clients = {}


def _client() -> "redis.Redis[bytes]":
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    return _clients[pid]


@app.task(queue="other", name="mark")
def mark(token: str) -> None:
    _client().rpush("marks:other", token)


@app.periodic(every=1.0, queue="timed", name="often")
def often() -> None:
    context = current_task()
    assert context is not None
    _client().rpush("marks:timed", context.id)
