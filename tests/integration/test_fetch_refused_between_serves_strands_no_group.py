"""A fetch refused inside its serving loop, after it served a fair group's last ready
task, strands no group (issue 29: fixh1's suspicion, checked).

The fair library defers the removals of a group it empties (the group's turn, its
token's mark in cancelled) to its flush(), which a fetch makes once, after its loops. A
refusal inside the loops (an ACL changed while the worker runs: Redis keeps what the
script wrote before) skipped it: the emptied group's turn kept claiming its token, which
was gone, and when the task came back (its lease refused, or expired) it joined its
group, took that turn for a live token, and was never delivered again. Now the refusal's
put-back flushes the groups first.

Fetches and acks called as a worker calls them, with their clock given, on the test's own
redis-server, as an ACL user from which one command is taken away between fetches.
"""
from __future__ import annotations

import random
from typing import Any, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_fetches import NOW, fetched
from tests.support.refused_part_way import drained, fetched_while_refused, taken_away
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "betweenserves"
KEYS = QueueKeys(APP, "default")
#: a task delivered this many times at most: never dead-lettered here
DELIVERIES = 100


def _app(url: str) -> Tuple[Minitask, Any, Any, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="fair", group_by="tenant", group_max_running=1)
    def fair(tenant: str, n: int) -> int:
        return n

    @app.task(name="paced", group_by="tenant", rate_limit="1000/s")
    def paced(tenant: str, n: int) -> int:
        return n

    @app.task(name="lim", rate_limit="1000/s", max_running=1)
    def lim(n: int) -> int:
        return n

    return app, fair, paced, lim


@pytest.mark.parametrize("command", ["hincrby", "zadd"])
def test_a_group_emptied_before_the_refusal_is_served_again(
        server: RedisServer, admin: "redis.Redis[bytes]", command: str) -> None:
    """Six groups of one task each (group_max_running: a '/' claim, served by the fair
    library); a fetch of five serves the first, and the lease of its task (zadd) or its
    delivery count (hincrby) is refused: that group is emptied, its token gone."""
    url = user_without(admin, server, "nothing")
    app, fair, _, _ = _app(url)
    try:
        ids = [fair.delay(f"t{n}", n).id for n in range(6)]
        with taken_away(admin, command), pytest.raises(BrokerError):
            fetched(app, NOW, 1_000, max_deliveries=DELIVERIES)
        # the refused lease (1 s) has expired
        delivered = drained(app, NOW + 2_000, ids, max_deliveries=DELIVERIES)
        assert sorted(delivered) == sorted(ids)  # none stranded, each once
        assert admin.zcard(KEYS.leases) == 0
        assert admin.keys("*:g:*") == []  # no group left behind
    finally:
        app.close()


#: Commands a fetch's serving loop runs after a serve (the fair library's, the lease's,
#: the limits'), each taken away in turn.
SERVING = ["zadd", "hincrby", "hstrlen", "hget", "zrem", "hdel", "hset", "lpush", "rpush",
           "sadd", "srem", "zscore", "scard", "sismember", "hmget", "zrange", "lpop",
           "incr", "pexpire", "zremrangebyscore", "zcard", "llen", "lindex"]


@pytest.mark.parametrize("seed", range(6))
def test_refusals_between_serves_strand_no_group(
        server: RedisServer, admin: "redis.Redis[bytes]", seed: int) -> None:
    """Rounds of a queue mixing fair groups (of one task and of several; a slot each, or
    a rate limit), limited tasks and solo groups, fetched five at a time with one command
    taken away after a few fetches; every task then runs, and no group is left."""
    url = user_without(admin, server, "nothing")
    app, fair, paced, lim = _app(url)
    rng = random.Random(seed)
    now = NOW
    try:
        for command in SERVING:
            ids = []
            for n in range(rng.randrange(8, 16)):
                kind = rng.randrange(4)
                if kind == 0:
                    ids.append(fair.delay(rng.choice("abc") + command, n).id)
                elif kind == 1:
                    ids.append(fair.delay(f"one{n}{command}", n).id)
                elif kind == 2:
                    ids.append(paced.delay(rng.choice("de") + command, n).id)
                else:
                    ids.append(lim.apply_async((n,), limit_key=rng.choice([None, "k"])).id)
            acked, now = fetched_while_refused(app, admin, [command], rng.randrange(0, 3) + 3,
                                               now, max_deliveries=DELIVERIES)
            delivered = acked + drained(app, now, ids, max_deliveries=DELIVERIES)
            now += 1_000
            assert (command, sorted(set(ids) - set(delivered))) == (command, [])
            assert (command, admin.zcard(KEYS.leases)) == (command, 0)
            assert (command, admin.keys("*:g:*")) == (command, [])  # no group left behind
    finally:
        app.close()
