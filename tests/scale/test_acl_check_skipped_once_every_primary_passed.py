"""On Redis Cluster, once a client's ACL check passed on every primary node, a send
asks nothing more (refacl29): before, ``acl_unchecked`` stayed True for ever there,
and every send looked up the node of each of its keys (``sending_keys`` and
``node_of``) to find it checked already. Before every primary passed (an app sending
to one queue: one node), a send to a hash slot that passed looks up no node either."""
from __future__ import annotations

import asyncio
from typing import Any, List

import pytest
import redis.asyncio

from minitask import Minitask
from minitask.broker import acl_check
from tests.support.topologies import Cluster

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]


def _counting(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """The keys ``acl_check.node_of`` is asked about from now on."""
    asked: List[str] = []
    real = acl_check.node_of

    def counted(owner: Any, key: str) -> str:
        asked.append(key)
        return real(owner, key)
    monkeypatch.setattr(acl_check, "node_of", counted)
    return asked


def test_a_send_after_every_primary_passed_asks_no_node(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "aclonce"
    queues = cluster.queues_on_distinct_shards(name, 3)
    app = Minitask(name, broker=cluster.url)
    add = app.task(name="add")(lambda a: a)
    try:
        for queue in queues:  # one send to each primary: each checked
            add.apply_async((0,), queue=queue)
        asked = _counting(monkeypatch)
        for number in range(100):
            add.apply_async((number,), queue=queues[number % 3])
        assert asked == [], len(asked)
        assert not app.broker.transport.acl_unchecked
    finally:
        app.close()


def test_sends_to_one_queue_ask_no_node_after_the_first(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "aclonequeue"
    app = Minitask(name, broker=cluster.url)
    add = app.task(name="add")(lambda a: a)
    try:
        add.apply_async((0,), queue="only")  # its node checked: the others never sent to
        asked = _counting(monkeypatch)
        for number in range(100):
            add.apply_async((number,), queue="only")
        assert asked == [], len(asked)
        assert app.broker.transport.acl_unchecked  # (not every primary checked)
    finally:
        app.close()


def test_an_async_send_after_every_primary_passed_asks_no_node(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "aclonceasync"
    queues = cluster.queues_on_distinct_shards(name, 3)
    app = Minitask(name, broker=cluster.url, async_broker=redis.asyncio.RedisCluster(
        host="127.0.0.1", port=cluster.nodes[0].port))
    add = app.task(name="add")(lambda a: a)

    async def sends() -> List[str]:
        try:
            for queue in queues:
                await add.aapply_async((0,), queue=queue)
            asked = _counting(monkeypatch)
            for number in range(100):
                await add.aapply_async((number,), queue=queues[number % 3])
            return asked
        finally:
            await app.aclose()
    try:
        asked = asyncio.run(sends())
        assert asked == [], len(asked)
    finally:
        app.close()
