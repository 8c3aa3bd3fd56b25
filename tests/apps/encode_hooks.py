"""An app whose tasks return values their registered type cannot encode (its encode
function raises an Exception, or a KeyboardInterrupt), with hooks that leave a mark
in Redis for each event they hear (``marks:hooks``: ``event:task:error type``); the
broker comes from MINITASK_BROKER_URL."""
from __future__ import annotations

import os
from typing import Any

import redis

from minitask import Minitask

app = Minitask("encodehooks")


class Shy:
    """A value whose encode function raises an Exception."""


class Shier:
    """A value whose encode function raises a KeyboardInterrupt."""


def _refuse(value: Any) -> bytes:
    raise ValueError("cannot encode this")


def _interrupt(value: Any) -> bytes:
    raise KeyboardInterrupt("while encoding")


app.register_type(Shy, 52, _refuse, lambda data: Shy())
app.register_type(Shier, 53, _interrupt, lambda data: Shier())


def _heard(event: str) -> Any:
    def hook(context: Any, *rest: Any) -> None:
        error = rest[0] if rest else None
        with redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"]) as client:
            client.rpush("marks:hooks", f"{event}:{context.name}:{type(error).__name__}")
    return hook


for _event in ("task_success", "task_failure", "task_retry", "task_dead"):
    app.on(_event, _heard(_event))


@app.task(retries=1, retry_backoff=0, name="returns_shy")
def returns_shy() -> Any:
    return Shy()


@app.task(retries=1, retry_backoff=0, name="returns_shier")
def returns_shier() -> Any:
    return Shier()
