"""An asyncio Redis Cluster client given ``address_remap`` (the cluster behind NAT, a
proxy, Docker) reaches every node by the remapped address, from minitask's first
call on. Before: redis-py picks a command's node before it reads the cluster's
slots, so the first call of a fresh client (the ACL check of the first send, or a
``astatus()``) went to a random primary; the MOVED that answered it was kept under
the address Redis gave, never remapped, and that slot's sends went around the
proxy (on a NAT, to an address the client cannot reach).
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Coroutine, Set

import pytest

from minitask import Minitask
from tests.support.cluster_cuts import CutCluster, cut_cluster  # noqa: F401 (a fixture)
from tests.support.cutting import run_closing

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

#: Fresh clients tried: each first call picked its node at random (one in three
#: right), so all of them lucky before the fix: (1/3) ** 8.
CLIENTS = 8


def _addresses(client: Any) -> Set[int]:
    """The ports of every node the async cluster client would send to."""
    manager = client.nodes_manager
    nodes = list(manager.nodes_cache.values())
    nodes += [node for held in manager.slots_cache.values() for node in held]
    return {int(node.port) for node in nodes}


def _each_fresh_client(cut: CutCluster,
                       first: Callable[[Minitask, Any], Coroutine[Any, Any, Any]]) -> None:
    proxies = {proxy.port for proxy in cut.proxies.values()}
    for _ in range(CLIENTS):
        client = cut.async_client()
        app = Minitask(f"remap-{uuid.uuid4().hex[:8]}", broker=cut.client(),
                       async_broker=client)
        task = app.task(name="add")(lambda a: a)

        async def checks() -> None:
            await first(app, task)
            assert _addresses(client) <= proxies, (
                f"nodes reached around address_remap: {_addresses(client) - proxies}")
        run_closing(app, checks)


def test_the_first_async_send_reaches_nodes_by_their_remapped_address(
        cut_cluster: CutCluster) -> None:  # noqa: F811
    async def send(app: Minitask, task: Any) -> None:
        await task.adelay(1)
    _each_fresh_client(cut_cluster, send)


def test_a_first_async_status_reaches_nodes_by_their_remapped_address(
        cut_cluster: CutCluster) -> None:  # noqa: F811
    async def status(app: Minitask, task: Any) -> None:
        assert await app.handle(f"none-{uuid.uuid4().hex}").astatus() == "unknown"
    _each_fresh_client(cut_cluster, status)
