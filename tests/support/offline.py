"""A unit test's guard against the network: building a client from a broker URL must
not connect (``no_network``, autouse where imported)."""
from __future__ import annotations

import socket
from typing import Any

import pytest
from redis.cluster import NodesManager
from redis.exceptions import RedisClusterException


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket connection fails the test; a cluster's discovery finds it unreachable
    (as redis-py says); MINITASK_BROKER_URL is unset."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a unit test tried to open a connection")

    def unreachable(self: NodesManager, **kwargs: Any) -> None:
        raise RedisClusterException("Redis Cluster cannot be connected")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(NodesManager, "initialize", unreachable)
    monkeypatch.delenv("MINITASK_BROKER_URL", raising=False)
