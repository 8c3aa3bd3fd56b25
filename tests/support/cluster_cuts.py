"""A Redis Cluster reached through cutting proxies: a reply to a script call is lost.

Each node of a test's ``Cluster`` gets a ``CuttingProxy``; a client that starts on
the first node's proxy and whose ``address_remap`` sends every other connection
through them (the cluster still names its nodes by their own ports): no call
reaches a node but through its proxy, as behind a NAT. ``cut_reply_to(marker)``
arms every proxy: the first write holding ``marker`` reaches Redis and runs, its
reply is dropped and that connection closed. ``evalsha_calls`` counts the scripts
a node ran, to tell a call that ran once from one that a retry sent again.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Tuple

import pytest
import redis
import redis.asyncio

from tests.support.cutting import CuttingProxy
from tests.support.topologies import Cluster


class CutCluster:
    """Proxies in front of every node of ``cluster``, and clients that use them."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.proxies: Dict[int, CuttingProxy] = {n.port: CuttingProxy(n) for n in cluster.nodes}

    def _remap(self, address: Tuple[str, int]) -> Tuple[str, int]:
        host, port = address
        proxy = self.proxies.get(int(port))
        return ("127.0.0.1", proxy.port) if proxy is not None else (host, port)

    def client(self) -> "redis.RedisCluster":
        first = self.proxies[self.cluster.nodes[0].port]
        return redis.RedisCluster(host="127.0.0.1", port=first.port, socket_timeout=10,
                                  address_remap=self._remap)

    def async_client(self) -> "redis.asyncio.RedisCluster":
        first = self.proxies[self.cluster.nodes[0].port]
        return redis.asyncio.RedisCluster(host="127.0.0.1", port=first.port, socket_timeout=10,
                                          address_remap=self._remap)

    def cut_reply_to(self, marker: bytes) -> None:
        for proxy in self.proxies.values():
            proxy.cut_reply_to(marker)

    def cuts(self) -> int:
        return sum(proxy.cuts for proxy in self.proxies.values())

    def evalsha_calls(self) -> int:
        """Script calls (EVALSHA) every node ran so far."""
        total = 0
        for node in self.cluster.nodes:
            with node.client() as client:
                stats: Any = client.info("commandstats")
            total += int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
        return total

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.close()


@pytest.fixture
def cut_cluster(cluster: Cluster) -> Iterator[CutCluster]:
    """The module's cluster behind cutting proxies (the ``cluster`` fixture's)."""
    found = CutCluster(cluster)
    try:
        yield found
    finally:
        found.close()
