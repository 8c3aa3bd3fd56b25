"""A workflow sent in one script call (spawn.lua, spawn_flow.lua) was not atomic
against a key of another type that minitask did not write: the call wrote a step's
marker, then its write to messages, delayed or a ready list failed (WRONGTYPE), so the
marker stayed (a retry never sent that step) and earlier steps stayed half-sent. And a
chord in one queue was refused after its group's state was written (left until its
ttl). Each call now checks the keys it writes before its first write and is refused
naming the key and its type: Redis's whole key set is as it was. A wake list of
another type refuses nothing (it is left as it is, as delay() leaves it), and a
grouped step's fair-queue keys of another type are moved aside, never refusing a call
half-way. A test-owned redis-server; no worker (nothing runs)."""
from __future__ import annotations

from typing import Callable, Iterator

import pytest

from minitask import BrokerError, Minitask, chain, chord, group
from minitask.broker.keys import queue_keys
from tests.support.refused_workflows import key_set, two_queue_app
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

MAIN = queue_keys("spawned", "default")
OTHER = queue_keys("spawned", "other")
#: The ready list of the default priority (5), where the steps due now go.
READY = MAIN.ready[9 - 5]


@pytest.fixture
def server(start_redis) -> RedisServer:  # type: ignore[no-untyped-def]
    return start_redis()


@pytest.fixture
def app(server: RedisServer) -> Iterator[Minitask]:
    app = two_queue_app("spawned", server.client())

    @app.task(name="limited", max_running=1)
    def limited(x: int) -> int:
        return x

    @app.task(name="fair", group_by="tenant")
    def fair(x: int, tenant: str = "a") -> int:
        return x

    yield app
    app.close()


def _chain(app: Minitask) -> None:
    chain(app.tasks["add"].si(1, 1), app.tasks["add"].s(2)).delay()


def _chain_later(app: Minitask) -> None:
    chain(app.tasks["add"].si(1, 1).set(delay=3600), app.tasks["add"].s(2)).delay()


def _limited_chain(app: Minitask) -> None:
    chain(app.tasks["limited"].si(1), app.tasks["add"].s(2)).delay()


def _limited_later(app: Minitask) -> None:
    chain(app.tasks["limited"].si(1).set(delay=3600), app.tasks["add"].s(2)).delay()


def _chord(app: Minitask) -> None:
    add = app.tasks["add"]
    chord([add.si(1, 1), add.si(2, 2)], app.tasks["total"].s()).delay()


def _limited_chord(app: Minitask) -> None:
    limited = app.tasks["limited"]
    chord([limited.si(1), limited.si(2)], app.tasks["total"].s()).delay()


def _chord_elsewhere(app: Minitask) -> None:
    """Members in one queue, the body (and so the group's state) in another."""
    ping = app.tasks["ping"]
    chord([ping.si(1), ping.si(2)], app.tasks["total"].s()).delay()


SENDS = {"chain": _chain, "chain_later": _chain_later, "limited_chain": _limited_chain,
         "limited_later": _limited_later, "chord": _chord, "limited_chord": _limited_chord}
#: (send, key planted): each key a send writes (delayed: only for a step due later;
#: a ready list: only for one due now)
CASES = [(send, planted) for send in sorted(SENDS)
         for planted in ("messages", "delayed" if send.endswith("later") else "ready")]


@pytest.mark.parametrize("send, planted", CASES)
def test_a_one_call_workflow_refused_for_a_foreign_key_writes_nothing(
        server: RedisServer, app: Minitask, send: str, planted: str) -> None:
    key = {"messages": MAIN.messages, "delayed": MAIN.delayed, "ready": READY}[planted]
    client = server.client()
    client.set(key, "planted")
    before = key_set(server)
    with pytest.raises(BrokerError) as refused:
        SENDS[send](app)
    assert key_set(server) == before, key_set(server) ^ before  # no marker, group, registry
    said = str(refused.value)
    assert key in said and "string" in said and "nothing was changed" in said, said
    assert client.get(key) == b"planted"
    client.delete(key)  # once it is gone, the same workflow is sent
    SENDS[send](app)
    assert client.exists(MAIN.messages) == 1


def test_a_chord_whose_group_is_kept_in_another_queue_writes_nothing(
        server: RedisServer, app: Minitask) -> None:
    """The group's state (the body's queue) and the members (another) are two calls:
    checked before either runs."""
    client = server.client()
    client.set(OTHER.messages, "planted")
    before = key_set(server)
    with pytest.raises(BrokerError) as refused:
        _chord_elsewhere(app)
    assert key_set(server) == before, key_set(server) ^ before
    assert OTHER.messages in str(refused.value)


@pytest.mark.parametrize("send", [_chain, _limited_chain, _chord, _chord_elsewhere])
def test_a_foreign_wake_list_refuses_no_workflow(
        server: RedisServer, app: Minitask, send: Callable[[Minitask], None]) -> None:
    client = server.client()
    for key in (MAIN.wake, OTHER.wake):
        client.set(key, "planted")
    send(app)
    assert client.hlen(MAIN.messages) + client.hlen(OTHER.messages) >= 1
    assert client.get(MAIN.wake) == b"planted" and client.get(OTHER.wake) == b"planted"


def test_a_grouped_step_sent_past_foreign_fair_queue_keys(
        server: RedisServer, app: Minitask) -> None:
    """Its group's ready set and turn, the groups, cancelled and groups_ready of another
    type: moved aside (or left as they are), the step sent, its group in the rotation.
    (Held before this change too: a guard that no refusal was added for them.)"""
    client = server.client()
    planted = [MAIN.fair_group("a", "ready"), MAIN.fair_group("a", "turn"),
               MAIN.fair_group("a", "running"), MAIN.flow_prefix + "groups",
               MAIN.cancelled]
    for key in planted:
        client.set(key, "planted")
    client.hset(MAIN.flow_prefix + "groups_ready", "x", "planted")
    chain(app.tasks["fair"].si(1, tenant="a"), app.tasks["add"].s(2)).delay()
    assert client.hlen(MAIN.messages) == 1 and client.hlen(MAIN.flow) == 1
    assert client.zcard(MAIN.fair_group("a", "ready")) + client.llen(READY) >= 1
    for key in (MAIN.fair_group("a", "running"), MAIN.flow_prefix + "groups"):
        assert client.get(key) == b"planted", key  # read or counted past, left
    for key in (MAIN.fair_group("a", "ready"), MAIN.fair_group("a", "turn"), MAIN.cancelled):
        assert client.get(key + ":foreign") == b"planted", key  # moved aside


def test_a_group_over_two_queues_is_still_checked_first(
        server: RedisServer, app: Minitask) -> None:
    """One queue's call refused after another's was sent: spawn_check.lua's round trip
    (kept: each call checks only its own queue)."""
    client = server.client()
    client.set(OTHER.messages, "planted")
    before = key_set(server)
    with pytest.raises(BrokerError):
        group([app.tasks["add"].si(1, 1), app.tasks["ping"].si(2)]).delay()
    assert key_set(server) == before, key_set(server) ^ before
