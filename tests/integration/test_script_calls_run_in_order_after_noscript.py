"""A write of several script calls runs them in the order written, also when Redis
does not know one of them (a fresh server, a restart, a failover, SCRIPT FLUSH).

A step that sends a chord whose members are in another queue than its state (the
chord's body's queue) writes ``group_create`` and then ``spawn`` in one write. Redis
answered NOSCRIPT to the first and ran the second, and the transport loaded the first
and ran it only once every reply was read: meanwhile the members were queued with no
state to join, and a worker that ran one at once had group_join answer 'gone', the
chord's body cancelled (flake in test_canvas_workers.py's nesting test, issue 36).
Here the worker of the members' queue runs them at that very moment, in a thread,
right after the write's replies are read. Real redis-server, in-process workers.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any, List

import pytest
import redis

import minitask.broker.transport as transport_module
from minitask import Minitask, chain, chord
from minitask.stores.scripts import source

pytestmark = [pytest.mark.integration, pytest.mark.app("scriptorder", on="server")]


def run_all(app: Minitask, queues: List[str]) -> int:
    ran = 0
    worker = app.worker(queues=queues, burst=True)
    while worker.run_once():
        ran += 1
    return ran


def test_a_chord_sent_by_a_step_has_its_state_before_its_members_run(
        app: Minitask, admin: "redis.Redis[bytes]", monkeypatch: pytest.MonkeyPatch) -> None:
    @app.task(name="order.add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="order.mul", queue="other")
    def mul(x: int, y: int) -> int:
        return x * y

    @app.task(name="order.total")
    def total(values: List[int]) -> int:
        return sum(values)

    admin.script_flush()  # Redis knows no script: a fresh server, or after a restart
    handle = chain(add.s(1, 1), chord([mul.s(i) for i in range(3)], total.s())).delay()
    group_create = hashlib.sha1(source("group_create").encode()).hexdigest()
    spawn = hashlib.sha1(source("spawn").encode()).hexdigest()
    # sending the chain loaded spawn.lua; no chord was sent from a step yet
    assert admin.script_exists(spawn, group_create) == [True, False]

    exchange = transport_module._exchange
    members: List[int] = []

    def then_a_fast_worker(connection: Any, data: bytes, count: int, *rest: Any) -> Any:
        replies = exchange(connection, data, count, *rest)
        if not members and count > 1 and group_create.encode() in data:
            # the members' worker, woken by the write, runs them before anything else
            # this step does
            thread = threading.Thread(target=lambda: members.append(run_all(app, ["other"])))
            thread.start()
            thread.join(timeout=60)
        return replies

    monkeypatch.setattr(transport_module, "_exchange", then_a_fast_worker)
    run_all(app, ["default"])  # add(1, 1), which sends the chord (and its body, once sent)
    monkeypatch.undo()
    assert members == [3]  # the write that sent the members was met
    run_all(app, ["default", "other"])
    assert handle.status() == "succeeded"
    assert handle.get(timeout=10) == 2 * (0 + 1 + 2)
