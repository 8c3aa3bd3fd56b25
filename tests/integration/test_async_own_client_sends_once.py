"""``async_broker=`` a client of the app's own making (a subclass: redis-py's own EVALSHA
path, with its retry): a send whose reply is lost (a proxy drops it after the
script ran) is told sent (``lost the reply``, its id listed), and the script runs once.
Before: redis-py's retry sent the call again (the script ran twice, nothing said); the
confirmed send (durability) was sent again by its pipeline's retry, and a timeout there
said the write "may or may not have been made" with no id but the first."""
from __future__ import annotations

import uuid
from typing import Any, Optional

import pytest
import redis
import redis.asyncio

from minitask import Minitask
from minitask.errors import BrokerError
from tests.support.cutting import CuttingProxy, run_closing, said_lost
from tests.support.servers import RedisServer

pytestmark = pytest.mark.integration


class OwnClient(redis.asyncio.Redis):  # type: ignore[type-arg]
    """A client class of the app's own (one that logs, say): not a plain redis-py one."""


def _evalsha_calls(admin: "redis.Redis[bytes]") -> int:
    stats: Any = admin.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


@pytest.mark.parametrize("durability", [None, "replicated"])
def test_an_async_send_on_a_client_of_ones_own_whose_reply_is_lost_runs_once(
        admin: "redis.Redis[bytes]", redis_server: RedisServer,
        durability: Optional[str]) -> None:
    proxy = CuttingProxy(redis_server)
    client = OwnClient(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    options: Any = {} if durability is None else {"durability": durability,
                                                  "durability_timeout": 0.2}
    app = Minitask(f"own-{uuid.uuid4().hex[:8]}", broker=redis_server.url,
                   async_broker=client, **options)
    task = app.task(name="add")(lambda a: a)

    async def checks() -> None:
        try:
            await task.aapply_async((0,), task_id=f"warm-{uuid.uuid4().hex}")  # scripts loaded
        except BrokerError:
            assert durability is not None  # (no replica: not confirmed)
        task_id = f"cut-{uuid.uuid4().hex}"
        before = _evalsha_calls(admin)
        proxy.cut_reply_to(task_id.encode())
        with pytest.raises(BrokerError) as lost:
            await task.aapply_async((1,), task_id=task_id)
        assert proxy.cuts == 1
        said_lost(lost.value, task_id)
        assert _evalsha_calls(admin) - before == 1, "the script ran more than once"
        assert await app.handle(task_id).astatus() == "queued"

    try:
        run_closing(app, checks)
    finally:
        proxy.close()
