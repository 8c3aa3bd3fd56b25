"""A worker's fetch refused part way strands no task (issue 29, review29o): a real
worker at ``--prefetch 5`` on a real redis-server, as an ACL user who loses HINCRBY (the
delivery count, which fetch.lua writes after each lease) while it runs. Each fetch then
leases one task and is refused; fetch.lua put back none of the others its ``LPOP key 5``
had popped (their messages kept, in no ready list: never run), and on a fair queue lost
the solo groups' tokens the same way. Now every task stays in a ready list (as its id,
or its group's token) or leased, and once the ACL is restored each runs exactly once."""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.acl import user_without
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
KEYS = queue_keys("aclfetch", "default")


def reachable(admin: "redis.Redis[bytes]", task_id: str) -> bool:
    """Whether the task can still be served: leased, or in a ready list as its id or in
    its solo group's token, or in its group's ready set."""
    if admin.zscore(KEYS.leases, task_id) is not None:
        return True
    raw = task_id.encode()
    if any(raw in entry for ready in KEYS.ready for entry in admin.lrange(ready, 0, -1)):
        return True
    return any(raw in member for key in admin.keys("*:g:*:ready")
               for member in admin.zrange(key, 0, -1))


@pytest.mark.parametrize("kind", ["plain", "grouped"])
def test_a_fetch_refused_part_way_strands_no_task(processes: Processes, server: RedisServer,
                                                  tmp_path: Path, kind: str) -> None:
    admin: "redis.Redis[bytes]" = server.client()
    url = user_without(admin, server, "nothing")
    app = Minitask("aclfetch", broker=server.client())
    try:
        counted = app.task(name="counted")(lambda key: key)
        grouped = app.task(name="grouped", group_by="tenant")(lambda tenant, key: key)
        log = tmp_path / "worker.log"
        processes.worker("tests.apps.acl_fetch", "--pool", "thread", "-c", "1",
                         "--prefetch", "5", log=log,
                         env={"MINITASK_BROKER_URL": url, "TEST_VISIBILITY": "3"})
        assert counted.delay("warm").get(timeout=DEADLINE) == "warm"  # the worker is up
        admin.execute_command("ACL", "SETUSER", "limited", "-hincrby")
        keys = [f"{kind}{n}" for n in range(6)]
        if kind == "plain":
            handles = [counted.delay(key) for key in keys]
        else:
            handles = [grouped.delay(f"t{n}", key) for n, key in enumerate(keys)]
        wait_until(lambda: "NOPERM" in log.read_text() or "hincrby" in log.read_text().lower(),
                   timeout=DEADLINE, message="the fetch refused")
        lost: List[str] = [h.id for h in handles if not reachable(admin, h.id)]
        assert lost == [], "tasks in no ready list and not leased"

        admin.execute_command("ACL", "SETUSER", "limited", "+hincrby")
        assert [h.get(timeout=DEADLINE) for h in handles] == keys
        wait_until(lambda: admin.zcard(KEYS.leases) == 0 and admin.hlen(KEYS.messages) == 0,
                   timeout=DEADLINE, message="no trace of the tasks left")
        assert [admin.get(f"runs:{key}") for key in keys] == [b"1"] * len(keys)
    finally:
        app.close()
        admin.close()
