"""A fetch whose park-list count (flow_parked, INCRBY) Redis refuses still hands out
what it leased (issue 29, review LOW). The count is for status only; fetch.lua left it
as it was when the refusal read "NOPERM", which no version says inside a script (6.2
and 7.0: "The user executing the script can't run this command", 7.2 on and Valkey:
"ACL failure in script: ..."): the fetch raised after its leases were written, so
the worker got none of them and they waited out their leases, each fetch again.
Fetches called as a worker calls them, on the test's own redis-server (each version
of ``make test-redis``), as an ACL user without INCRBY."""
from __future__ import annotations

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import user_without
from tests.support.refused_fetches import NOW, fetched
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "parkcount"
KEYS = QueueKeys(APP, "default")


def test_a_refused_parked_count_keeps_the_fetch(
        server: RedisServer, admin: "redis.Redis[bytes]") -> None:
    url = user_without(admin, server, "nothing")
    app = Minitask(APP, broker=url)
    paced = app.task(name="paced", rate_limit="1/m")(lambda n: n)
    try:
        ids = [paced.delay(n).id for n in range(3)]
        admin.execute_command("ACL", "SETUSER", "limited", "-incrby")  # as a worker runs
        leased = fetched(app, NOW, count=3)  # one under the pace, two parked
        assert len(leased) == 1 and leased[0] in ids, leased
        assert admin.zrange(KEYS.leases, 0, -1) == [leased[0].encode()]
        parks = admin.keys(KEYS.flow_prefix + "*:park")
        assert len(parks) == 1 and admin.llen(parks[0]) == 2
        assert admin.get(KEYS.flow_parked) is None  # refused: left as it was
    finally:
        app.close()
