"""An app whose tasks have flow specs (tests/integration/test_flow_spec_beyond_range.py);
the broker comes from MINITASK_BROKER_URL. Each task records its token in the
Redis list ``specrange:ran``, pushed from the task itself."""
from __future__ import annotations

import os

import redis

from minitask import Minitask

_clients = {}


def _client() -> "redis.Redis[bytes]":
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    return _clients[pid]


def ran(token: str) -> None:
    _client().rpush("specrange:ran", token)


def define(app: Minitask) -> None:
    """The tasks, on ``app`` (a test's producer defines them as the worker does)."""
    app.task(name="logged", rate_limit="5/s")(ran)          # a log of starts
    app.task(name="paced", rate_limit="1000/s")(ran)        # paced alone (500 or more)
    app.task(name="grouped", group_by="tenant", group_rate_limit="5/s")(grouped)


def grouped(tenant: str, token: str) -> None:
    ran(token)


app = Minitask("specrange")
define(app)
