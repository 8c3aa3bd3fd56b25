"""Members of the queue registry longer than a name can be (planted: no minitask writes
one) are removed on the server and never sent: 4 of 50 MB made each ``minitask
status`` 1.5 s and 1.4 GB read, the dashboard's home 2.9 s. The queues beside them
are still listed."""
from __future__ import annotations

import asyncio

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import AppKeys
from minitask.dashboard.web import Dashboard
from tests.apps.foreign import build
from tests.support.cli import said as cli
from tests.support.pages import get

pytestmark = [pytest.mark.integration, pytest.mark.app(on="server", build=build)]

APP = "tests.apps.foreign"
KEYS = AppKeys("foreign")
#: Planted members, each this long.
PLANTED = 3
BIG = 5_000_000
#: What one status, one dead list and three pages may make Redis send, in all.
MOST_SENT = 1_000_000


def test_huge_members_of_the_queue_registry_are_never_sent(
        app: Minitask, admin: "redis.Redis[bytes]", caplog: pytest.LogCaptureFixture) -> None:
    admin.sadd(KEYS.queues, "other", "extra")
    for index in range(PLANTED):
        admin.sadd(KEYS.queues, bytes([65 + index]) * BIG)
    before = int(admin.info("stats")["total_net_output_bytes"])
    code, said = cli("status", "-A", APP)
    assert code == 0, said
    assert "extra" in said, said
    code, said = cli("dead", "-A", APP, "list")
    assert code == 0, said
    dashboard = Dashboard(app)
    for path in ("/", "/api/queues", "/dead"):
        status, body = get(dashboard, path)
        assert status.startswith("200"), (path, status)
    status, body = get(dashboard, "/api/queues")
    assert "extra" in body
    sent = int(admin.info("stats")["total_net_output_bytes"]) - before
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"
    assert admin.scard(KEYS.queues) == 2  # removed unsent by the first read (names_page.lua)
    assert any("longer than" in record.getMessage() and KEYS.queues in record.getMessage()
               for record in caplog.records)


def test_an_async_lookup_never_reads_huge_members_of_the_queue_registry(
        app: Minitask, admin: "redis.Redis[bytes]") -> None:
    admin.sadd(KEYS.queues, "other", "extra")
    for index in range(PLANTED):
        admin.sadd(KEYS.queues, bytes([65 + index]) * BIG)

    async def names() -> list:  # type: ignore[type-arg]
        broker = app.async_broker()
        try:
            return await broker.queue_names()
        finally:
            await broker.close()  # its connection belongs to this loop

    before = int(admin.info("stats")["total_net_output_bytes"])
    found = asyncio.run(names())
    sent = int(admin.info("stats")["total_net_output_bytes"]) - before
    assert "extra" in found and "other" in found, found
    assert sent < MOST_SENT, f"Redis sent {sent:,} bytes"
