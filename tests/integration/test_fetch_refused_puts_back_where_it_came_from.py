"""A fetch refused part way puts each entry back where it came from, exactly once
(issue 29, after review29o's fix: test_fetch_refused_part_way_puts_back_every_entry.py).

An ACL changed while a worker runs makes Redis refuse a command inside fetch.lua after
it took an entry, keeping what the script wrote before. Found left after that fix:

- the flow-control due loop (the limiters due hand out their parked tasks): a task
  taken from its limiter's park list whose lease (ZADD) was refused went to its ready
  list, not back to its park list; a group's token taken from a park list was lost
  when a write after its pop (its mark in cancelled, a ZADD) was refused;
- a refused read of a task's message (HGET) was taken for the message itself: the
  task was leased with an error table in its place (a worker could not read it);
- a group's token that flow.lua's serve() had pushed back to a ready list was put
  back again when a later write of the same serve (ZADD) was refused: two tokens, an
  extra turn for the group, and its task taken from its set and leased by none.

And ack_fetch.lua (an ack and the next fetch in one call): a refusal in its fetch half
leaves the ack whole and puts the fetch's entries back the same way.

Fetches called as a worker calls them (``QueueStore.fetch``, ``ack_then``), with their
clock given, on the test's own redis-server, as an ACL user whose rules change.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from minitask.stores.queue import FetchTerms
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_fetches import NOW, fetched
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "putback"
KEYS = QueueKeys(APP, "default")
RATE = "500/s"  # paced (flow.lua's PACED_FROM): admitted by GET and SET, no ZADD
TOKEN = 255  # a group's token's first byte


def _app(url: str) -> Tuple[Minitask, Any, Any, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="paced", rate_limit=RATE)
    def paced(n: int) -> int:
        return n

    @app.task(name="paced_grouped", rate_limit=RATE, group_by="tenant")
    def paced_grouped(tenant: str, n: int) -> int:
        return n

    @app.task(name="grouped", group_by="tenant")
    def grouped(tenant: str, n: int) -> int:
        return n

    return app, paced, paced_grouped, grouped


def _drain(app: Minitask, admin: "redis.Redis[bytes]", now_ms: int) -> List[str]:
    """Every task the fetches deliver, until none is left ready, parked or due."""
    delivered: List[str] = []
    for _ in range(40):
        got = fetched(app, now_ms)
        delivered += got
        now_ms += 1_000  # each limiter's pace allows again
        if not got and sum(admin.llen(key) for key in KEYS.ready) == 0 \
                and admin.zcard(KEYS.flow_due) == 0:
            break
    return delivered


def _state(admin: "redis.Redis[bytes]") -> Dict[str, Any]:
    parks = sorted(key for key in admin.keys(KEYS.flow_prefix + "*:park"))
    return {"ready": [admin.lrange(key, 0, -1) for key in KEYS.ready],
            "parks": {key: admin.lrange(key, 0, -1) for key in parks},
            "due": admin.zrange(KEYS.flow_due, 0, -1),
            "limiters": admin.smembers(KEYS.flow_limiters),
            "leases": admin.zrange(KEYS.leases, 0, -1)}


def _parked_behind_a_pace(admin: "redis.Redis[bytes]", app: Minitask, send: Any) -> List[str]:
    """Tasks sent at once, more than the pace's burst: the fetch at NOW leases the burst
    and parks the rest in their limiter's park list (due when the pace allows)."""
    ids = [send(n) for n in range(30)]
    leased = fetched(app, NOW, count=30)
    parks = admin.keys(KEYS.flow_prefix + "*:park")
    assert leased and len(parks) == 1 and admin.llen(parks[0]) > 0
    return [task_id for task_id in ids if task_id not in leased]


@pytest.mark.parametrize("kind", ["task", "token"])
def test_an_entry_taken_from_a_park_list_goes_back_to_its_head(
        server: RedisServer, admin: "redis.Redis[bytes]", kind: str) -> None:
    """task: its lease (ZADD) refused went to its ready list; token: its mark in
    cancelled (ZADD) refused after its pop lost it, with its group's task."""
    url = user_without(admin, server, "nothing")
    app, paced, paced_grouped, _ = _app(url)
    try:
        if kind == "task":
            waiting = _parked_behind_a_pace(admin, app, lambda n: paced.delay(n).id)
        else:
            waiting = _parked_behind_a_pace(
                admin, app, lambda n: paced_grouped.delay(f"t{n}", n).id)
        before = _state(admin)
        admin.execute_command("ACL", "SETUSER", "limited", "-zadd")
        with pytest.raises(BrokerError):
            fetched(app, NOW + 1_000)  # the limiter is due: its first entry taken
        assert _state(admin) == before  # back at the head of its park list, still due

        admin.execute_command("ACL", "SETUSER", "limited", "+zadd")
        delivered = _drain(app, admin, NOW + 1_000)
        assert sorted(delivered) == sorted(waiting)  # every task, each exactly once
    finally:
        app.close()


@pytest.mark.parametrize("count", [1, 5])
def test_a_refused_read_of_a_message_is_no_message(
        server: RedisServer, admin: "redis.Redis[bytes]", count: int) -> None:
    """HGET refused after HSTRLEN measured the message: the task was leased with the
    error in place of its message; now the fetch is refused and the ids go back."""
    url = user_without(admin, server, "nothing")
    app, paced, _, _ = _app(url)
    plain = app.task(name="plain")(lambda n: n)
    try:
        ids = [plain.delay(n).id for n in range(6)]
        before = _state(admin)
        admin.execute_command("ACL", "SETUSER", "limited", "-hget")
        with pytest.raises(BrokerError):
            fetched(app, NOW, count=count)
        assert _state(admin) == before
        assert admin.hlen(KEYS.deliveries) == 0

        admin.execute_command("ACL", "SETUSER", "limited", "+hget")
        assert sorted(_drain(app, admin, NOW)) == sorted(ids)
    finally:
        app.close()


@pytest.mark.parametrize("count", [1, 5])
def test_a_token_serve_pushed_back_is_not_put_back_twice(
        server: RedisServer, admin: "redis.Redis[bytes]", count: int) -> None:
    """One group's tasks of two priorities: serving its first (9) moves its token to
    the list of its next (5), then marks it in cancelled (ZADD), refused. The token was
    put back to the priority-9 list as well (two tokens), and the first task, taken
    from its set, was in no place; now the token is in one list and the task waits."""
    url = user_without(admin, server, "nothing")
    app, _, _, grouped = _app(url)
    try:
        ids = [grouped.apply_async(("t", n), priority=p).id for n, p in ((0, 9), (1, 5))]
        admin.execute_command("ACL", "SETUSER", "limited", "-zadd")
        with pytest.raises(BrokerError):
            fetched(app, NOW, count=count)
        tokens = [entry for key in KEYS.ready for entry in admin.lrange(key, 0, -1)
                  if entry[0] == TOKEN]
        assert len(tokens) == 1
        ready_set = [key for key in admin.keys(KEYS.flow_prefix + "g:t:ready")]
        assert len(ready_set) == 1 and admin.zcard(ready_set[0]) == 2  # both wait

        admin.execute_command("ACL", "SETUSER", "limited", "+zadd")
        assert sorted(_drain(app, admin, NOW)) == sorted(ids)  # each exactly once
    finally:
        app.close()


@pytest.mark.parametrize("command", ["zadd", "hget"])
def test_ack_fetch_refused_in_its_fetch_keeps_its_ack_whole(
        server: RedisServer, admin: "redis.Redis[bytes]", command: str) -> None:
    """The ack is written whole, the fetch's popped entries go back, each task once."""
    url = user_without(admin, server, "nothing")
    app, _, _, _ = _app(url)
    plain = app.task(name="plain")(lambda n: n)
    try:
        first = plain.delay(0).id
        assert fetched(app, NOW, count=1) == [first]
        ids = [plain.delay(n).id for n in range(1, 7)]
        before = _state(admin)
        results = app.broker.results
        acks = [results.prepare_ack("default", first, None, 0)]
        admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
        held, reply = results.ack_then(acks, app.broker.queues.fetch_call(
            "default", NOW + 1, FetchTerms(lease_ms=600_000, count=5, max_deliveries=5)))
        assert held == [True] and isinstance(reply, BrokerError)
        after = _state(admin)
        assert after["leases"] == [] and not admin.hexists(KEYS.messages, first)
        assert after["ready"] == before["ready"]

        admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")
        assert sorted(_drain(app, admin, NOW + 2)) == sorted(ids)
    finally:
        app.close()
