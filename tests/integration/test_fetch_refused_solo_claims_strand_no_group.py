"""A fetch whose removal of served solo groups' claims Redis refuses strands no group.

A plain ``group_by`` task sent to a group with nothing else is a solo group: its task is
held in its token, its claim a field of the queue's groups_solo hash, and a fetch
serving it on its fast path removes that field once it is done (one HDEL for all).
With HDEL taken away while the worker runs (an ACL changed), the field stayed; when the
task came back (its lease expired) and joined its group, the stale claim was taken for a
live token, and the task waited behind a token that no longer existed, for good. Now a
claim naming the very task that joins its group is known stale (a task is in one place:
its token was served) and the group gets a new token.

Fetches and acks called as a worker calls them, with their clock given, on the test's own
redis-server, as an ACL user from which commands are taken away between fetches.
"""
from __future__ import annotations

import random
from typing import Any, List, Set, Tuple

import pytest
import redis

from minitask import BrokerError, Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "soloclaims"
KEYS = QueueKeys(APP, "default")
NOW = 1_900_000_000_000  # ms: the fetches' own clock (far from the server's: kept)


def _app(url: str) -> Tuple[Minitask, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="plain", group_by="tenant")
    def plain(tenant: str, n: int) -> int:
        return n

    return app, plain


def _fetch(app: Minitask, now_ms: int, lease_ms: int) -> List[str]:
    got = app.broker.queues.fetch("default", now_ms=now_ms, lease_ms=lease_ms, count=5,
                                  max_deliveries=100)
    return [delivery.task_id for delivery in got.deliveries]


def _acked(app: Minitask, got: List[str], acked: Set[str]) -> None:
    for task_id in got:
        try:
            app.broker.results.ack("default", task_id, None, 0)
            acked.add(task_id)
        except BrokerError:
            pass  # (its lease expires: delivered again)


@pytest.mark.parametrize("taken", [("hdel",), ("hdel", "zrem")])
@pytest.mark.parametrize("seed", range(4))
def test_solo_groups_served_while_hdel_is_refused_are_all_delivered(
        server: RedisServer, admin: "redis.Redis[bytes]", taken: Tuple[str, ...],
        seed: int) -> None:
    """Solo groups (and a few groups of several tasks) fetched five at a time, HDEL (and
    ZREM) taken away after the first fetch, fetches and acks going on while refused, the
    ACL given back: every task is delivered, none left leased, no group left behind."""
    url = user_without(admin, server, "nothing")
    app, plain = _app(url)
    rng = random.Random(seed)
    try:
        ids = [plain.delay(f"solo{n}" if rng.random() < 0.8 else rng.choice("ab"), n).id
               for n in range(20)]
        acked: Set[str] = set()
        now = NOW
        for tick in range(5):
            if tick == 1:
                for command in taken:
                    admin.execute_command("ACL", "SETUSER", "limited", f"-{command}")
            try:
                got = _fetch(app, now, 1_000)
            except BrokerError:
                got = []  # (the leases it took are lost with the reply: they expire)
            now += 10
            _acked(app, got, acked)
        for command in taken:
            admin.execute_command("ACL", "SETUSER", "limited", f"+{command}")
        now += 2_000  # the leases taken while refused (1 s) have expired
        for _ in range(80):
            _acked(app, _fetch(app, now, 600_000), acked)
            now += 10
            if acked >= set(ids):
                break
        assert sorted(set(ids) - acked) == []  # none stranded
        assert admin.zcard(KEYS.leases) == 0
        assert admin.keys("*:g:*") == []  # no group left behind
        assert admin.hlen(KEYS.groups_solo) == 0
    finally:
        app.close()
