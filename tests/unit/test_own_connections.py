"""Each thread's own connection stays out of the client pool's cap: the pool still
hands out as many connections as it allows, however many threads have their own."""
from __future__ import annotations

import threading
from typing import Any, List

import fakeredis

from minitask.broker.connections import Connections


def test_threads_own_connections_leave_the_pool_its_whole_cap() -> None:
    """Five threads with their own connections, then two pool calls at once, on a pool
    capped at two: counted against the cap, the third own connection was refused."""
    client = fakeredis.FakeRedis(max_connections=2)
    connections = Connections(client)
    failures: List[BaseException] = []
    made: List[Any] = []

    def own() -> None:
        try:
            made.append(connections.own())
        except BaseException as exc:  # noqa: B036 - reported by the assert below
            failures.append(exc)

    threads = [threading.Thread(target=own) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert failures == [] and len(made) == 5
    pool = client.connection_pool
    first, second = pool.get_connection(), pool.get_connection()  # the whole cap
    pool.release(first)
    pool.release(second)
    assert client.ping()
    connections.disconnect_all()
