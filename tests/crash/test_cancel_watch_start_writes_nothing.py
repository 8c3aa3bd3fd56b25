"""A starting cancel watch learns where its queue's ``cancels`` stream ends without
writing to it (issue 29, a low finding of probe 29e): it added a wake-up entry (XADD
NOMKSTREAM) to take that entry's id, so each worker start (each process-pool child's
too) woke every other watch once, and on a Redis full under ``noeviction`` the XADD
failed and the watch backed off instead of watching. It now reads from a little before
the server's time (request_cancel.lua says it), on a real redis-server, with real
worker processes."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import queue_keys
from tests.support.acl import documented_acl
from tests.support.processes import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.crash

DEADLINE = 60.0
KEYS = queue_keys("aio", "default")


def watching(client: "redis.Redis[bytes]", count: int) -> bool:
    """Whether ``count`` clients are blocked in an XREAD (the workers' cancel watches)."""
    return sum(1 for entry in client.client_list()
               if entry.get("cmd") == "xread" and "b" in entry.get("flags", "")) >= count


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_starting_watches_add_no_entry_and_still_hear_requests(
        processes: Processes, server: RedisServer, nap: Any, pool: str,
        tmp_path: Path) -> None:
    client = server.client()
    client.xadd(KEYS.cancels, {b"id": b"long-gone"})  # a stream there already
    client.config_resetstat()
    logs = [tmp_path / "one.log", tmp_path / "two.log"]
    workers = [processes.start("-m", "minitask", "worker", "-A", "tests.apps.aio", "--pool",
                               pool, "-c", "2", log=log,
                               env={"MINITASK_BROKER_URL": server.url}) for log in logs]
    each = 2 if pool == "process" else 1  # a watch per child, or the worker's own
    wait_until(lambda: watching(client, 2 * each), timeout=DEADLINE,
               message="both workers' cancel watches are up")
    assert client.xlen(KEYS.cancels) == 1  # before: one wake-up entry per watch started
    assert "cmdstat_xadd" not in client.info("commandstats")
    handle = nap.delay("long", 30.0)
    wait_until(lambda: client.llen("marks:started:long") == 1, timeout=DEADLINE,
               message="the task started")
    assert handle.cancel(running=True) is True
    wait_until(lambda: any(f"task {handle.id}: stop requested" in log.read_text()
                           for log in logs if log.exists()),
               timeout=15, message="the worker running it heard the request")
    for worker in workers:
        worker.send_signal(signal.SIGTERM) if pool == "process" else worker.kill()
        worker.wait(timeout=DEADLINE)


def test_a_watch_starts_on_a_full_redis_and_hears_a_request_posted_later(
        server: RedisServer) -> None:
    """Under ``maxmemory`` with ``noeviction`` a write is refused: the look at where the
    stream ends writes nothing, so it answers (it raised, and the watch backed off)."""
    client = server.client()
    app = Minitask("aio", broker=server.client())
    try:
        client.xadd(KEYS.cancels, {b"id": b"long-gone"}, id="1-0")  # long before now
        client.zadd(KEYS.leases, {"leased": 2 ** 50})
        store = app.broker.cancels
        assert store.request("default", "not-leased") is False  # its script loaded
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)  # full: every write is refused
        with pytest.raises(redis.ResponseError, match="maxmemory"):
            client.set("minitask:probe", "1")
        positions = store.positions(["default"])
        assert set(positions) == {"default"}
        assert client.xlen(KEYS.cancels) == 1
        client.config_set("maxmemory", 0)
        assert store.request("default", "leased") is True
        heard = store.watch(positions, timeout=5.0)
        assert [task_id for _, _, task_id in heard] == ["leased"]
    finally:
        client.config_set("maxmemory", 0)
        app.close()


def test_without_time_a_watch_takes_the_id_of_a_wake_up_entry_as_before(
        server: RedisServer) -> None:
    """An ACL user of the documented list without ``xinfo|stream`` and ``time``: the
    look says neither the last id nor the time, and the watch learns where the stream
    ends by adding a wake-up entry, as it did."""
    admin = server.client()
    rules = [rule for rule in documented_acl() if rule not in ("+time", "+xinfo|stream")]
    admin.acl_setuser("notime", enabled=True, passwords=["+pw"], reset=True)
    admin.execute_command("ACL", "SETUSER", "notime", *rules)
    user = redis.Redis(host="127.0.0.1", port=server.port, username="notime", password="pw")
    app = Minitask("aio", broker=user)
    try:
        admin.zadd(KEYS.leases, {"leased": 2 ** 50})
        admin.xadd(KEYS.cancels, {b"id": b"long-gone"}, id="1-0")
        positions = app.broker.cancels.positions(["default"])
        assert admin.xlen(KEYS.cancels) == 2  # the wake-up entry
        assert positions["default"] == admin.xrevrange(KEYS.cancels, count=1)[0][0].decode()
        assert app.broker.cancels.request("default", "leased") is True
        heard = app.broker.cancels.watch(positions, timeout=5.0)
        assert [task_id for _, _, task_id in heard] == ["leased"]
    finally:
        app.close()
