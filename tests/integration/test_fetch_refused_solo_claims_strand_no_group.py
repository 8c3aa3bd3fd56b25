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
from typing import Any, Tuple

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_fetches import NOW
from tests.support.refused_part_way import drained, fetched_while_refused
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "soloclaims"
KEYS = QueueKeys(APP, "default")
#: a task delivered this many times at most: never dead-lettered here
DELIVERIES = 100


def _app(url: str) -> Tuple[Minitask, Any]:
    app = Minitask(APP, broker=url)

    @app.task(name="plain", group_by="tenant")
    def plain(tenant: str, n: int) -> int:
        return n

    return app, plain


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
        acked, now = fetched_while_refused(app, admin, taken, 5, NOW,
                                           max_deliveries=DELIVERIES)
        acked += drained(app, now, set(ids) - set(acked), max_deliveries=DELIVERIES)
        assert sorted(set(ids) - set(acked)) == []  # none stranded
        assert admin.zcard(KEYS.leases) == 0
        assert admin.keys("*:g:*") == []  # no group left behind
        assert admin.hlen(KEYS.groups_solo) == 0
    finally:
        app.close()
