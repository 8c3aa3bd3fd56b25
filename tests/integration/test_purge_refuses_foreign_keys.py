"""``minitask purge`` (purge_ready.lua) on a queue one of whose keys holds another
type, on a real redis-server (issue 29, probe 17: M2).

The script popped the ready lists and deleted messages with no type check before
its first write: with three tasks at priority 5 and ``ready:2`` holding a string,
the purge exited 3 with "WRONGTYPE ... inspect the key named" (naming none) and
the three tasks were deleted all the same. Every key it writes (the flow keys
aside, read tolerantly) is now checked first: one of another type refuses the
call naming it, and nothing is deleted. The dashboard's purge action takes the
same path and answers with the error, not a 500.
"""
from __future__ import annotations

from typing import Any, Iterator, Tuple
from urllib.parse import quote

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.cli import purge as purge_command
from minitask.dashboard.web import Dashboard
from tests.support.cli import operate_with, run
from tests.support.servers import RedisServer
from tests.unit.test_dashboard import call

pytestmark = pytest.mark.integration

K = QueueKeys("m2", "other")


@pytest.fixture
def shop(redis_server: RedisServer, admin: "redis.Redis[bytes]",
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[Minitask, Any]]:
    app = Minitask("m2", broker=redis_server.client())

    @app.task(queue="other")
    def echo(x: int) -> int:
        return x

    operate_with(app, monkeypatch, purge_command)
    try:
        yield app, echo
    finally:
        monkeypatch.undo()
        app.close()


@pytest.mark.parametrize("key", [K.ready[7], K.cancelled, K.leases, K.deliveries, K.order])
def test_a_key_of_another_type_refuses_the_purge_naming_it_and_nothing_is_deleted(
        shop: Tuple[Minitask, Any], admin: "redis.Redis[bytes]",
        capsys: pytest.CaptureFixture[str], key: str) -> None:
    app, echo = shop
    handles = [echo.apply_async((n,), priority=5) for n in range(3)]
    admin.set(key, "junk")
    code, said = run(capsys, "purge", "-A", "m2", "other", "--yes")
    assert code == 3 and key in said and "nothing was changed" in said, said
    assert [h.status() for h in handles] == ["queued"] * 3
    assert admin.llen(K.ready[4]) == 3 and admin.hlen(K.messages) == 3
    assert admin.get(key) == b"junk"  # left as it was

    dashboard = Dashboard(app)
    status, _, page = call(dashboard, "/actions/purge", "POST",
                           f"queue=other&csrf={quote(dashboard.csrf_token)}")  # it asks
    assert status == "200 OK" and 'id="question"' in page, (status, page)
    status, _, page = call(dashboard, "/actions/purge", "POST",
                           f"queue=other&confirm=yes&back=/&csrf={quote(dashboard.csrf_token)}")
    assert not status.startswith("500") and key in page, (status, page)
    assert [h.status() for h in handles] == ["queued"] * 3

    admin.delete(key)
    code, said = run(capsys, "purge", "-A", "m2", "other", "--yes")
    assert code == 0 and "deleted 3 ready task(s)" in said, said
    assert [h.status() for h in handles] == ["unknown"] * 3
