"""A Redis Cluster behind proxies that answer one script call in Redis's place.

``ForgedCluster`` is ``CutCluster`` (tests/support/cluster_cuts.py) with a
``ForgingProxy`` before each node: ``forge(marker, "loading")`` answers the first
write holding ``marker`` with ``-LOADING`` and never hands it to Redis (as a node
loading its data refuses a call: it did not run); ``forge(marker, "garbled")``
hands it to Redis (it runs) and puts bytes no client can parse in place of its
reply. The writes after it pass as they are.
"""
from __future__ import annotations

import socket
import threading
from typing import Iterator

import pytest

from tests.support.cluster_cuts import CutCluster
from tests.support.cutting import CuttingProxy
from tests.support.servers import RedisServer
from tests.support.topologies import Cluster

LOADING = b"-LOADING Redis is loading the dataset in memory\r\n"
#: No reply of RESP starts with "?": the client's parser gives up on it.
GARBLED = b"?this is no reply\r\n"


class ForgingProxy(CuttingProxy):
    """A ``CuttingProxy`` that forges the reply to one write instead of cutting it."""

    def __init__(self, server: RedisServer) -> None:
        self.mode = "loading"
        self.forged = 0
        super().__init__(server)

    def forge(self, marker: bytes, mode: str) -> None:
        assert mode in ("loading", "garbled"), mode
        self.mode = mode
        self.cut_reply_to(marker)

    def _pump(self, source: socket.socket, target: socket.socket, garble: threading.Event,
              replies: bool, held: threading.Event) -> None:
        """As ``CuttingProxy._pump``'s, forging instead of cutting (``held`` unused)."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                marker = self._marker
                if not replies and marker is not None and marker in data:
                    self._marker = None
                    self.forged += 1
                    if self.mode == "loading":
                        source.sendall(LOADING)  # (source: the client's end)
                        continue
                    garble.set()  # before Redis can answer
                elif replies and garble.is_set():
                    garble.clear()
                    data = GARBLED
                target.sendall(data)
        except OSError:
            pass
        for one in (source, target):
            try:
                one.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            one.close()


class ForgedCluster(CutCluster):
    """Forging proxies in front of every node of ``cluster``, and clients that use them."""

    def __init__(self, cluster: Cluster) -> None:  # (no CuttingProxy of its own)
        self.cluster = cluster
        self.forgers = {n.port: ForgingProxy(n) for n in cluster.nodes}
        self.proxies = {port: proxy for port, proxy in self.forgers.items()}

    def forge(self, marker: bytes, mode: str) -> None:
        for proxy in self.forgers.values():
            proxy.forge(marker, mode)

    def forged(self) -> int:
        return sum(proxy.forged for proxy in self.forgers.values())


@pytest.fixture
def forged_cluster(cluster: Cluster) -> Iterator[ForgedCluster]:
    """The module's cluster behind forging proxies (the ``cluster`` fixture's)."""
    found = ForgedCluster(cluster)
    try:
        yield found
    finally:
        found.close()
