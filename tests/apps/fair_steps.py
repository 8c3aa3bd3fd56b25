"""An app for fair queues in workflows (guide/fair-queues): steps of chains and
chords that go into their groups. The broker comes from MINITASK_BROKER_URL;
``producer(broker)`` builds the same app on a test's side, for sending.

Steps push their start and end to ``steps:log:<group>`` from inside the task, so
a test reads the order in which the steps of each group really ran.
"""
from __future__ import annotations

import os
import time
from typing import Any, List

import redis

from minitask import Minitask

_clients = {}


def _log(group: str, *records: str) -> None:
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(os.environ["MINITASK_BROKER_URL"])
    for record in records:
        _clients[pid].rpush(f"steps:log:{group}", record)
        time.sleep(0.03)


def serial(group: str, n: int, tag: str) -> str:
    """Logs ``start:<tag>:<n>`` and ``end:<tag>:<n>`` in its group's log, and returns
    its group (the next step of a chain may take its group from it)."""
    _log(group, f"start:{tag}:{n}", f"end:{tag}:{n}")
    return group


def tenant_of(group: str) -> str:
    """An ungrouped first step whose result names the group of the next."""
    return group


def collect(groups: List[str], tag: str) -> int:
    """A chord body: logs its run in the log of its header's first group."""
    _log(groups[0], f"start:{tag}:0", f"end:{tag}:0")
    return len(groups)


def capped(group: str, n: int) -> None:
    """Logs its start and end in ``steps:log:capped`` (all groups in one log)."""
    _log("capped", f"start:{group}:{n}", f"end:{group}:{n}")


def _register(app: Minitask) -> Minitask:
    # one at a time per group: group_max_running=1
    app.task(name="steps.serial", group_by="group", group_max_running=1)(serial)
    app.task(name="steps.tenant_of")(tenant_of)
    app.task(name="steps.collect", group_max_running=1)(collect)
    # flow control and groups on one task: two at once in all, one per group
    app.task(name="steps.capped", group_by="group", group_max_running=1, max_running=2)(capped)
    return app


def producer(broker: Any) -> Minitask:
    """The same app on the test's side (its tasks never run there)."""
    return _register(Minitask("fairsteps", broker=broker))


app = _register(Minitask("fairsteps",
                         visibility_timeout=float(os.environ.get("TEST_VISIBILITY", "30"))))
