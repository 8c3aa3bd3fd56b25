"""A fair queue's solo group strands no task when fetches are refused part way (issue 29,
after review29o; tests/crash/test_worker_fetch_refused_part_way.py failed 3 times in 4).

A solo group of a plain task keeps its one task in its token and its claim in the
queue's groups_solo; fetch.lua's fast path leases the task from the popped token and
removes the claims of the tokens it served once, at the end of the fetch. With HINCRBY
taken from the worker's ACL user (refused after the lease), a fetch refused part way
put back the token whose task it had just leased (the task leased and in its token at
once), and lost the claim removals of every token it had served. The next fetch, refused
too, popped that token again and dropped it (its task leased already), its claim left
in groups_solo with no token; when the lease expired, the task's id came back, joined
its group, found that claim and took it for a live token: the group took its set form
around a token in no ready list, and its task was never delivered again. Now a token
whose task is leased is served (not put back), and a refused fetch removes the claims
of the tokens it served, but for the one it puts back.

Fetches called as a worker calls them (``QueueStore.fetch``), with their clock given,
on the test's own redis-server with an ACL user whose rules change between fetches.
"""
from __future__ import annotations

from typing import Any, List, Tuple

import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_fetches import NOW, fetched
from tests.support.servers import RedisServer

import pytest

pytestmark = pytest.mark.integration

APP = "soloclaims"
KEYS = QueueKeys(APP, "default")
READY = KEYS.ready[4]  # the default priority's list


def _app(url: str) -> Tuple[Minitask, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="grouped", group_by="tenant")
    def grouped(tenant: str, n: int) -> int:
        return n

    return app, grouped


def _holders(admin: "redis.Redis[bytes]", task_id: str) -> List[str]:
    """Where the task is held: leased, in a ready list (as its id or in its solo group's
    token), in its group's ready set."""
    raw = task_id.encode()
    places = ["lease"] if admin.zscore(KEYS.leases, task_id) is not None else []
    places += ["ready" for key in KEYS.ready for entry in admin.lrange(key, 0, -1)
               if raw in entry]
    places += ["group" for key in admin.keys("*:g:*:ready")
               for member in admin.zrange(key, 0, -1) if raw in member]
    return places


def test_refused_fetches_strand_no_solo_group(server: RedisServer,
                                              admin: "redis.Redis[bytes]") -> None:
    url = user_without(admin, server, "nothing")
    app, grouped = _app(url)
    try:
        ids = [grouped.delay(f"t{n}", n).id for n in range(6)]  # six solo groups
        assert admin.hlen(KEYS.groups_solo) == 6
        admin.execute_command("ACL", "SETUSER", "limited", "-hincrby")
        for tick in range(2):  # a worker retries its fetch while refused
            with pytest.raises(BrokerError):
                fetched(app, NOW + tick, lease_ms=1_000)
            # each task held in one place: the first each fetch popped leased (its token
            # served), the others in their tokens, back at the head of the list in order
            leased = tick + 1
            assert [_holders(admin, task_id) for task_id in ids] == (
                [["lease"]] * leased + [["ready"]] * (6 - leased))
            claims = admin.hgetall(KEYS.groups_solo)
            tokens = admin.lrange(READY, 0, -1)
            # a claim for each token in the list, and none for a group with no token
            assert sorted(claims) == [f"t{n}".encode() for n in range(leased, 6)]
            assert [token.rsplit(b"\xff", 1)[1] for token in tokens] == sorted(claims)

        admin.execute_command("ACL", "SETUSER", "limited", "+hincrby")
        delivered: List[str] = []
        now = NOW + 2_000  # the refused fetches' lease (1 s) has expired
        for _ in range(10):
            got = fetched(app, now)
            delivered += got
            now += 1
            if not got and admin.llen(READY) == 0:
                break
        assert sorted(delivered) == sorted(ids)  # every task, each exactly once
        assert admin.hlen(KEYS.groups_solo) == 0
        assert admin.keys("*:g:*") == []  # no group left in its set form
    finally:
        app.close()
