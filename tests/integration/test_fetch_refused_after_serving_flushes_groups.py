"""A fetch refused after its ready lists were served strands no fair group (issue 29,
probe29s H1).

fetch.lua's put-back covers the loops that take entries; after them the fetch wrote
its hints and counts (the wake list's DEL, flow_parked's INCRBY and DEL) before the fair
library's flush(), which removes the turn of each group it emptied. With DEL (or INCRBY)
taken from the worker's ACL user, a fetch that leased a fair group's last ready task was
refused there: the group's turn stayed, claiming a token that no longer existed; when the
lease expired the task came back, joined its group, took that turn for a live token,
and was never delivered again. Now flush() comes first, and those hints and counts are
written tolerantly (a refusal skips them: a worker is woken by its own timer; the count
is status only, started afresh by the fetches).

Fetches and acks called as a worker calls them, with their clock given, on the test's own
redis-server, as an ACL user whose rules change between fetches; a queue mixing a fair
task (group_by, group_max_running=1) and a limited one (rate_limit, max_running,
limit_key).
"""
from __future__ import annotations

from typing import Any, List, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "flushfirst"
KEYS = QueueKeys(APP, "default")
NOW = 1_900_000_000_000  # ms: the fetches' own clock (far from the server's: kept)


def _app(url: str) -> Tuple[Minitask, Any, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="fair", group_by="tenant", group_max_running=1)
    def fair(tenant: str, n: int) -> int:
        return n

    @app.task(name="lim", rate_limit="1000/s", max_running=1)
    def lim(n: int) -> int:
        return n

    return app, fair, lim


def _holders(admin: "redis.Redis[bytes]", task_id: str) -> List[str]:
    """Where the task is held: leased, in a ready list (its id, or the token of a solo
    group, its claim in groups_solo, holding it), its group's ready set, a limiter's park
    list."""
    raw = task_id.encode()
    places = ["lease"] if admin.zscore(KEYS.leases, task_id) is not None else []
    solo = {group: b"\xff" + claim + b"\xff" + group
            for group, claim in admin.hgetall(KEYS.groups_solo).items()}
    places += ["ready" for key in KEYS.ready for entry in admin.lrange(key, 0, -1)
               if entry == raw or (raw in entry and entry in solo.values())]
    places += ["group" for key in admin.keys("*:g:*:ready")
               for member in admin.zrange(key, 0, -1) if raw in member]
    places += ["park" for key in admin.keys("*:park")
               for entry in admin.lrange(key, 0, -1) if raw in entry]
    return places


@pytest.mark.parametrize("command", ["del", "incrby"])
def test_refused_after_serving_strands_no_group(server: RedisServer,
                                                admin: "redis.Redis[bytes]",
                                                command: str) -> None:
    url = user_without(admin, server, "nothing")
    app, fair, lim = _app(url)
    queues, results = app.broker.queues, app.broker.results
    try:
        ids = []
        # groups of several tasks (a slot each) and groups of one, between limited tasks
        # that park behind one another (max_running=1: flow_parked counted)
        for n in range(16):
            ids.append(fair.delay("abc"[n % 3] if n < 10 else f"solo{n}", n).id)
            ids.append(lim.apply_async((n,), limit_key="k1" if n % 2 else None).id)
            ids.append(lim.apply_async((n,)).id)
        admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
        refused, acked = 0, []
        for tick in range(30):  # a worker fetches and acks on while refused
            try:
                got = queues.fetch("default", now_ms=NOW + tick * 10, lease_ms=1_000,
                                   count=5, max_deliveries=100)
            except BrokerError:  # the leases it took are lost with the reply
                refused += 1
                got = None
            for delivery in got.deliveries if got else ():
                try:
                    if results.ack("default", delivery.task_id, None, 0):
                        acked.append(delivery.task_id)
                except BrokerError:
                    pass  # (its lease expires: delivered again)
            # every task held in exactly one place (acked: none)
            assert [(ids.index(task_id), tick, _holders(admin, task_id)) for task_id in ids
                    if len(_holders(admin, task_id)) > 1] == []
        assert refused > 0

        admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")
        delivered = list(acked)
        now = NOW + 2_000  # the leases taken while refused (1 s) have expired
        for _ in range(60):
            got = queues.fetch("default", now_ms=now, lease_ms=600_000, count=5,
                               max_deliveries=100)
            for delivery in got.deliveries:
                delivered.append(delivery.task_id)
                results.ack("default", delivery.task_id, None, 0)
            now += 10  # the rate limit's window passes
            if set(delivered) >= set(ids):
                break
        assert sorted(set(delivered)) == sorted(ids)  # every task ran (at least once)
        assert admin.zcard(KEYS.leases) == 0
        assert admin.keys("*:g:*") == []  # no group left behind
    finally:
        app.close()
