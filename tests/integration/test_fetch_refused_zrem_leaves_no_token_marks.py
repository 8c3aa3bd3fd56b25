"""Fetches refused part way leave no token mark in ``cancelled`` and lose no task.

A fair group's token in a ready list has a mark in the queue's ``cancelled`` set, so that
status leaves it out of the ready count (a token is no task): a solo group of a task with
limits (its claim '/', in its turn), a group in its set form. A fetch that served a
group's last task dropped its token and removed its mark after its serves, in one ZREM;
with ZREM taken away while the worker runs (an ACL changed), that removal was refused
after the token was gone, and the mark stayed for good: status counted as many ready tasks
fewer (one to a few marks in 4 of the 6 ZREM rounds here, before). Now the first mark a
fetch removes is removed before the serve writes anything else, its refusal raised with
the token still in the fetch's hand (put back, with its mark).

A token taken from a limiter's park list and served had its task leased only after the
limiter's removals (its park list emptied: ZREM of flow_due, SREM of flow_limiters): with
SREM (or ZREM) refused, the task had left its group and was never leased, never to run
(a task or two lost in 5 of the 6 SREM rounds here, before). Now it is leased first.

Fetches and acks called as a worker calls them, with their own clock, as an ACL user from
which one command is taken away for a dozen fetches; the tasks sent by the default user.
"""
from __future__ import annotations

import random
from typing import Any, List, Sequence, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "tokenmarks"
KEYS = QueueKeys(APP, "default")
NOW = 1_900_000_000_000  # ms: the fetches' own clock (far from the server's: kept)


def _app(broker: Any) -> Tuple[Minitask, Sequence[Any], Any]:
    """The app on ``broker``: three grouped tasks (plain, a group limit, a rate limit:
    each solo group of the last two has a '/' claim and a marked token), and one not."""
    app = Minitask(APP, broker=broker)

    @app.task(name="plain", group_by="tenant")
    def plain(tenant: str, n: int) -> int:
        return n

    @app.task(name="capped", group_by="tenant", group_max_running=1)
    def capped(tenant: str, n: int) -> int:
        return n

    @app.task(name="paced", group_by="tenant", rate_limit="50/s")
    def paced(tenant: str, n: int) -> int:
        return n

    @app.task(name="loose")
    def loose(n: int) -> int:
        return n

    return app, (plain, capped, paced), loose


def _fetched(app: Minitask, now_ms: int, lease_ms: int) -> List[str]:
    got = app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=lease_ms, count=5,
                                  max_deliveries=100)
    return [delivery.task_id for delivery in got.deliveries]


def _ack(app: Minitask, got: List[str]) -> None:
    for task_id in got:
        try:
            app.broker.results.ack("default", task_id, None, 0)
        except BrokerError:
            pass  # (its lease expires: delivered again)


def _send(rng: random.Random, kinds: Sequence[Any], n: int) -> None:
    tenant = f"solo{n}" if rng.random() < 0.6 else rng.choice("abc")
    rng.choice(kinds).delay(tenant, n)


@pytest.mark.parametrize("command", ["zrem", "srem"])
@pytest.mark.parametrize("seed", range(6))
def test_tokens_served_while_a_removal_is_refused_leave_no_mark(
        server: RedisServer, admin: "redis.Redis[bytes]", command: str, seed: int) -> None:
    """Grouped tasks of solo groups and groups of several, plain, limited by their group
    and rate-limited, fetched five at a time (a third of the fetches' tasks never acked:
    their leases expire), ``command`` taken away for 12 fetches while more tasks come:
    once it is given back and every task ran, ``cancelled`` is empty, and status counts
    the ready tasks sent then."""
    app, _, _ = _app(user_without(admin, server, "nothing"))
    sender, kinds, loose = _app(server.client())
    rng = random.Random(seed)
    try:
        for n in range(30):
            _send(rng, kinds, n)
        now = NOW
        for tick in range(14):
            if tick == 1:
                admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
            if tick >= 2:
                _send(rng, kinds, 100 + tick)
            try:
                got = _fetched(app, now, 1_000)
            except BrokerError:
                got = []  # (the leases it took are lost with the reply: they expire)
            now += rng.choice([10, 30, 700, 1_500])
            if rng.random() < 0.7:
                _ack(app, got)
        admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")
        now += 2_000  # the leases taken while refused (1 s) have expired
        for _ in range(200):
            if not admin.hlen(KEYS.messages):
                break
            _ack(app, _fetched(app, now, 600_000))
            now += 30
        assert admin.hlen(KEYS.messages) == 0  # every task ran: none lost
        assert admin.zcard(KEYS.leases) == 0
        assert admin.zrange(KEYS.cancelled, 0, -1) == []  # no mark left
        for n in range(5):
            loose.delay(n)
        assert app.broker.queues.counts("default")["ready"] == 5
    finally:
        app.close()
        sender.close()
