"""``pause_group`` and ``resume_group`` on a fair queue whose set of paused groups
holds another type, on a real redis-server (issue 29, probe 17): the error named no
key ("WRONGTYPE Operation against a key..." with a generic hint); it now names the
key and says what was changed.
"""
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration

K = QueueKeys("pg", "fair")


@pytest.fixture
def app(redis_server: RedisServer, admin: "redis.Redis[bytes]") -> Iterator[Minitask]:
    made = Minitask("pg", broker=redis_server.client())

    @made.task(queue="fair", group_by="tenant")
    def work(tenant: str) -> str:
        return tenant

    work.delay("acme")
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("action", ["pause_group", "resume_group"])
def test_a_paused_set_of_another_type_is_named(
        app: Minitask, admin: "redis.Redis[bytes]", action: str) -> None:
    admin.set(K.groups_paused, "junk")
    with pytest.raises(BrokerError) as raised:
        getattr(app, action)("fair", "acme")
    assert raised.value.reason == "wrong type"
    assert K.groups_paused in str(raised.value) and "'acme'" in str(raised.value)
    assert admin.get(K.groups_paused) == b"junk"  # left as it was
    admin.delete(K.groups_paused)
    app.pause_group("fair", "acme")
    assert app.resume_group("fair", "acme")
