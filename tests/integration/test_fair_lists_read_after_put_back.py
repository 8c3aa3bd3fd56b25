"""A fetch of several pops a ready list's entries ahead of their turn (one LPOP with a
count) and puts those not served yet back (fetch.lua's unpop) before the fair
library writes to a ready list. flow.lua's elsewhere() looks in the ready lists for
a task on its way back, and reads which lists hold entries once a call (`filled`).
Before, two calls looked while the entries popped ahead were out of their list:
strayed() (a plain solo group's token its claim no longer names: its task looked
for before unpop, review L3) and serve()'s lift() of a paused solo group's claim
(no planted data: a pause is enough). The task behind the token was taken for one
waiting nowhere, and the lists read then, emptied by the pop, were kept for the
rest of the fetch: a group_max_running slot holder put back into one of them was
missed, its slot freed, and the next task of its group started before it. On a
redis-server of the test's own (its log read), with the manual clock.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterator, List, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.queue import Delivery
from minitask.wire.message import Outcome
from tests.support.clock import ManualClock
from tests.support.fair import warnings_logged_server  # noqa: F401 (a fixture)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = QueueKeys("test", "default")
READY_5 = K.ready[9 - 5]


@pytest.fixture
def app(logged_server: RedisServer, clock: ManualClock) -> Iterator[Minitask]:
    made = Minitask("test", broker=logged_server.client(), clock=clock)
    try:
        yield made
    finally:
        made.close()


def _tasks(app: Minitask) -> Tuple[Any, Any, Any]:
    """seq: one at a time per tenant; job: a grouped task of no limits (a plain solo
    group: its claim in groups_solo); plain: no group."""
    @app.task(group_by="tenant", name="seq", group_max_running=1)
    def seq(tenant: str, n: int) -> int:
        return n

    @app.task(group_by="tenant", name="job")
    def job(tenant: str, n: int) -> int:
        return n

    @app.task(name="plain")
    def plain(n: int) -> int:
        return n

    return seq, job, plain


def _fetch(app: Minitask, clock: ManualClock, count: int) -> List[Delivery]:
    return app.broker.queues.fetch("default", now_ms=clock.now_ms(), lease_ms=60_000,
                                   count=count, max_deliveries=5).deliveries


def _client(app: Minitask) -> "redis.Redis[bytes]":
    client: "redis.Redis[bytes]" = app.broker.transport.client
    return client


def _holder_behind(app: Minitask, clock: ManualClock, seq: Any,
                   first: Callable[[], None]) -> Tuple[str, str, List[str]]:
    """Group C's first task s1 runs and fails: retried in 500 ms, it keeps C's one
    slot. `first` puts an entry in ready list 5, then s2 joins C (C's token behind
    that entry), and the fetch of several that promotes s1 (behind C's token) pops
    all three at once. Returns s1, s2 and the ids that fetch leased."""
    s1 = seq.delay("C", 1)
    (delivery,) = _fetch(app, clock, 1)
    assert delivery.task_id == s1.id
    first()
    s2 = seq.delay("C", 2)
    message = dataclasses.replace(delivery.message(), attempt=2)
    assert app.broker.results.retry("default", message, clock.now_ms() + 500,
                                    Outcome("retrying", clock.now_ms()))
    clock.advance(1_000)
    return s1.id, s2.id, [d.task_id for d in _fetch(app, clock, 10)]


def test_a_paused_solo_group_ahead_of_a_holder_frees_no_slot(
        app: Minitask, clock: ManualClock) -> None:
    # (no planted data: the paused group's claim was lifted, its task looked for in
    # the ready lists, while the holder was popped ahead; the lists read then, all
    # empty, were kept for the fetch, and C's full set found no holder)
    seq, job, _ = _tasks(app)

    def paused() -> None:
        job.delay("P", 0)  # a plain solo group: its token in ready list 5
        app.pause_group("default", "P")

    s1, s2, got = _holder_behind(app, clock, seq, paused)
    assert s2 not in got, got  # before: s1's slot freed, s2 started ahead of it
    assert got == [s1], got
    assert _client(app).smembers(K.fair_group("C", "running")) == {s1.encode()}


def test_a_stray_token_ahead_of_a_holder_frees_no_slot(
        app: Minitask, clock: ManualClock, tmp_path: Path) -> None:
    # review L3: strayed() looked for the token's task before unpop(), with the
    # same effect on C's slot as above
    seq, job, _ = _tasks(app)
    client = _client(app)
    names = {}

    def stray() -> None:
        a0 = job.delay("A", 0)
        names[a0.id] = "a0"
        claim = client.hget(K.groups_solo, "A")
        assert claim is not None  # its claim moved to another generation: stray
        client.hset(K.groups_solo, "A", claim.replace(b".1:", b".7:", 1))

    s1, s2, got = _holder_behind(app, clock, seq, stray)
    names.update({s1: "s1", s2: "s2"})
    assert sorted(names[x] for x in got) == ["a0", "s1"], got
    assert client.smembers(K.fair_group("C", "running")) == {s1.encode()}
    text = (tmp_path / "redis.log").read_text(errors="replace")
    assert "freed 1 slot(s)" not in text, text[-3000:]


def test_a_stray_token_naming_the_task_behind_it_leaves_it_where_it_waits(
        app: Minitask, clock: ManualClock, tmp_path: Path) -> None:
    # review L3: the task behind the token, popped with it, was taken for one
    # waiting nowhere: moved into the token's group, counted there while it ran
    _, _, plain = _tasks(app)
    client = _client(app)
    x, y = plain.delay(0), plain.delay(1)
    client.lpush(READY_5, b"\xff7.7:5" + x.id.encode() + b"\xffA")
    assert [d.task_id for d in _fetch(app, clock, 2)] == [x.id, y.id]
    assert not client.keys("*:g:*") and not client.exists(K.groups_ready)
    assert client.llen(READY_5) == 0
    text = (tmp_path / "redis.log").read_text(errors="replace")
    assert "joined its group again" not in text, text[-3000:]
    assert _fetch(app, clock, 2) == []
