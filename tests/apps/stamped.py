"""An app for subprocess workers in tests, of tests.apps.basic's name, lease length
(``TEST_VISIBILITY``) and ``record`` task, with ``stamped``: a task that says on which
delivery it started, in which process and when, by Redis's clock (``TIME``), so that a
test can tell a re-delivery's start from the end of the lease it followed, both read on
the one clock. An app of its own: importing it adds no task to tests.apps.basic's."""
from __future__ import annotations

import os
import time
from typing import Tuple, Union

import redis

from minitask import Minitask, current_task
from tests.apps import basic
from tests.apps.basic import _mark

__all__ = ["app", "record", "stamped", "parse_stamp"]

app = Minitask(basic.app.name, visibility_timeout=basic.app.visibility_timeout,
               max_deliveries=int(os.environ.get("TEST_MAX_DELIVERIES", "5")))
record = app.task(name=basic.record.name)(basic.record.func)


@app.task
def stamped(key: str, seconds: float, again: float) -> str:
    """Push ``pid:delivery:redis_ms`` to ``stamps:<key>``, mark the start (as basic's
    tasks do), sleep ``seconds`` on a first delivery and ``again`` on any later one,
    mark the end."""
    context = current_task()
    assert context is not None
    client = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    try:
        seconds_now, micros = client.time()
        client.rpush(f"stamps:{key}",
                     f"{os.getpid()}:{context.delivery}:{seconds_now * 1000 + micros // 1000}")
    finally:
        client.close()
    _mark("started", key)
    time.sleep(seconds if context.delivery == 1 else again)
    _mark("done", key)
    return key


def parse_stamp(raw: Union[bytes, str]) -> Tuple[int, int, int]:
    """(pid, delivery, Redis time in ms) of one ``stamps:<key>`` entry."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    pid, delivery, at_ms = text.split(":")
    return int(pid), int(delivery), int(at_ms)
