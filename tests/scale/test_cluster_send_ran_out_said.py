"""On a real Redis Cluster, a send still refused when its time budget runs out says
plainly what happened: which call (the caller's "could not enqueue ..."), that
Redis Cluster did not run it within its budget of N s (the client's
``socket_connect_timeout``), why (a migration under way, the cluster down, no node
reachable), and that it did not run; Redis's last refusal is its cause (the last
session's open LOW).

Before the fix the error quoted the last raw refusal alone ("could not enqueue ...:
Multiple keys request during rehashing of slot 1234"), with no word of the budget.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Iterator, List

import pytest
import redis
import redis.asyncio
from redis.exceptions import TryAgainError

from minitask import Minitask
from minitask.errors import BrokerError
from tests.support.slot_moves import SlowMove
from tests.support.topologies import Cluster, slot_of

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

QUEUE = "q"
#: The client's socket_connect_timeout: the send's budget.
BUDGET = 1


@pytest.fixture
def app_of(cluster: Cluster) -> Iterator[Any]:
    made: List[Minitask] = []

    def make(aio: bool) -> Minitask:
        port = cluster.live_nodes()[0].port
        options: Any = {}
        if aio:
            options["async_broker"] = redis.asyncio.RedisCluster(
                host="127.0.0.1", port=port, socket_timeout=10,
                socket_connect_timeout=BUDGET)
        app = Minitask(f"ranout-{uuid.uuid4().hex[:8]}",
                       broker=cluster.client(socket_connect_timeout=BUDGET), **options)
        app.task(name="t", queue=QUEUE)(lambda x: x)
        app.task(name="warm", queue="warm")(lambda x: x)
        made.append(app)
        return app
    yield make
    for app in made:
        app.close()


def _causes(exc: BaseException) -> List[BaseException]:
    chain: List[BaseException] = []
    while exc is not None and len(chain) < 10:
        chain.append(exc)
        exc = exc.__cause__  # type: ignore[assignment]
    return chain


@pytest.mark.parametrize("aio", [False, True], ids=["sync", "async"])
def test_a_send_that_runs_out_its_budget_says_so_with_the_refusal_as_its_cause(
        cluster: Cluster, app_of: Any, aio: bool) -> None:
    app: Minitask = app_of(aio)
    moves: List[SlowMove] = []

    async def asend() -> None:
        try:
            await app.tasks["warm"].adelay(0)
            moves.append(SlowMove(cluster, slot_of(app.name, QUEUE), None))
            await app.tasks["t"].adelay(1)
        finally:
            await app.aclose()

    try:
        with pytest.raises(BrokerError) as refused:
            if aio:
                asyncio.run(asyncio.wait_for(asend(), 120))
            else:
                app.tasks["warm"].delay(0)
                moves.append(SlowMove(cluster, slot_of(app.name, QUEUE), None))
                app.tasks["t"].delay(1)
    finally:
        for move in moves:
            move.close()
    said = str(refused.value)
    assert said.startswith("could not enqueue"), said
    assert f"did not run the call (key 'minitask:{{{app.name}:{QUEUE}}}" in said, said
    assert f"within its budget of {BUDGET} s" in said, said
    assert "a migration under way (TRYAGAIN)" in said and "it did not run" in said, said
    assert not refused.value.sent and refused.value.reason == "error", refused.value.reason
    assert any(isinstance(cause, TryAgainError) for cause in _causes(refused.value)), \
        _causes(refused.value)
