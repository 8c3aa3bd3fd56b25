"""Any envelope at all, planted in a queue, ends run or dead-lettered; the worker goes on.

The envelopes are the decoding tests' (wrong types, missing fields, extreme
numbers, junk nested in the arguments); here each one goes through a real
worker loop, with a sound task behind it, on a fresh in-memory Redis.
"""
from __future__ import annotations

from typing import Any, List

import fakeredis
import msgpack  # type: ignore[import-untyped]
from hypothesis import HealthCheck, event, given, settings

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.envelopes import NOW_MS, envelopes


class Clock:
    def now_ms(self) -> int:
        return NOW_MS


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(envelopes())
def test_any_planted_envelope_ends_run_or_dead_and_the_task_behind_it_runs(obj: Any) -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    app = Minitask("shop", broker=client, clock=Clock())
    ran: List[Any] = []

    @app.task(name="shop.send")
    def send(*args: Any, **kwargs: Any) -> None:
        ran.append((args, kwargs))

    @app.task(name="shop.after")
    def after() -> str:
        return "after"

    if isinstance(obj, dict):
        # point what looks like an envelope at this queue and task, so that the
        # sound ones run: the junk then sits in the other fields
        for name, value in (("id", "planted"), ("task", "shop.send"), ("queue", "default")):
            if isinstance(obj.get(name), str):
                obj[name] = value
    assert app.broker.queues.enqueue("default", [("planted", pack(obj), 5, 0)], NOW_MS) == 1
    behind = after.delay()
    app.worker(burst=True).run()

    assert behind.status() == "succeeded"  # the worker went on past it
    keys = QueueKeys("shop", "default")
    assert client.zcard(keys.leases) == 0
    assert sum(client.llen(ready) for ready in keys.ready) == 0
    dead = [letter.task_id for letter in app.dead_letters()]
    status = app.handle("planted").status()
    event(status)
    if dead:
        assert dead == ["planted"] and status == "failed"
    else:  # it was sound: it ran once (or waits for its eta), and nothing else happened
        assert status in ("succeeded", "scheduled"), status
        assert len(ran) == (1 if status == "succeeded" else 0)
    app.close()
