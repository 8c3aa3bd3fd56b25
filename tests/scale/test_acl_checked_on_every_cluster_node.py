"""On a real Redis Cluster (three primaries), whose nodes each keep their own ACL
(``ACL SETUSER`` is not copied), the check before a send asks the node the send goes
to, not only the node of the client's first send (review 29m, item 2).

Before, the check asked once, the node of the first send's key: a node whose user
lacked DEL then had a delayed task stored, refused before its ZADD, in no queue for
ever (the original issue 29). And an ``app.batch()`` block refused part way through a
script on Redis Cluster (a call at a time) lost ``part_way``, its error not saying
that the resend by ``task_id=`` waits for the ACL to allow the command refused.
"""
from __future__ import annotations

import asyncio
from typing import Any, Tuple

import pytest
import redis
import redis.asyncio

from minitask import Minitask
from minitask.broker.keys import QueueKeys
from minitask.errors import BrokerError
from tests.support.servers import RedisServer
from tests.support.topologies import Cluster, slot_of

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]

USER = "clsender"


def _queues(cluster: Cluster, app: str) -> Tuple[str, str, RedisServer]:
    """Two queues of ``app`` on different primaries, and the second one's node."""
    first, second = cluster.queues_on_distinct_shards(app, 2)
    return first, second, cluster.owner_of_slot(slot_of(app, second))


def _user_everywhere(cluster: Cluster) -> str:
    """The URL of a user who may run every command, set on every node."""
    for node in cluster.nodes:
        with node.client() as client:
            client.execute_command("ACL", "SETUSER", USER, "reset", "on", ">pw", "~*",
                                   "&*", "+@all")
    return f"redis+cluster://{USER}:pw@" + ",".join(f"127.0.0.1:{node.port}"
                                                    for node in cluster.nodes)


def _acl(node: RedisServer, *rules: str) -> None:
    with node.client() as client:
        client.execute_command("ACL", "SETUSER", USER, *rules)


def _app(name: str, url: str) -> Tuple[Minitask, Any]:
    app = Minitask(name, broker=url)
    return app, app.task(name="add")(lambda a: a)


def test_a_node_whose_acl_lacks_a_command_is_checked_before_its_first_send(
        cluster: Cluster) -> None:
    name = "aclnodes"
    first, second, node = _queues(cluster, name)
    url = _user_everywhere(cluster)
    _acl(node, "-del")  # on the second queue's node only
    app, add = _app(name, url)
    try:
        add.apply_async((0,), queue=first)  # its node's check passes
        with pytest.raises(BrokerError) as refused:
            add.apply_async((1,), queue=second, delay=60, task_id="cl-1")
        error, said = refused.value, str(refused.value)
        assert not error.sent and not error.part_way and "+del" in said, said
        with node.client() as client:  # nothing half-written: no message in no queue
            assert not client.hexists(QueueKeys(name, second).messages, "cl-1")
        _acl(node, "+del")
        add.apply_async((1,), queue=second, delay=60, task_id="cl-1")  # as it says
        with node.client() as client:
            assert client.zscore(QueueKeys(name, second).delayed, "cl-1") is not None
    finally:
        app.close()


def test_a_batch_refused_part_way_on_a_cluster_says_part_way(cluster: Cluster) -> None:
    name = "aclbatchnodes"
    first, second, node = _queues(cluster, name)
    app, add = _app(name, _user_everywhere(cluster))
    try:
        for queue in (first, second):  # every node's check passes
            add.apply_async((0,), queue=queue)
        _acl(node, "-del")  # the ACL changed after the check
        with pytest.raises(BrokerError) as refused:
            with app.batch():
                add.apply_async((1,), queue=first, task_id="cb-1")
                add.apply_async((2,), queue=second, delay=60, task_id="cb-2")
        error, said = refused.value, str(refused.value)
        assert error.sent and error.part_way, said
        assert error.enqueued_ids == ["cb-1"] and "cb-2" in error.task_ids, said
        assert "is queued once" in said and "they never run twice" in said, said
        assert "does not mend" not in said, said
        with pytest.raises(BrokerError) as again:  # checked again: refused before writing
            add.apply_async((3,), queue=second, delay=60, task_id="cb-3")
        assert not again.value.sent and "+del" in str(again.value), str(again.value)
    finally:
        _acl(node, "+del")
        app.close()


def test_an_async_send_checks_its_own_node_too(cluster: Cluster) -> None:
    name = "aclasyncnodes"
    first, second, node = _queues(cluster, name)
    url = _user_everywhere(cluster)
    _acl(node, "-del")
    app = Minitask(name, broker=url, async_broker=redis.asyncio.RedisCluster(
        host="127.0.0.1", port=cluster.nodes[0].port, username=USER, password="pw"))
    add = app.task(name="add")(lambda a: a)

    async def sends() -> BrokerError:
        try:
            await add.aapply_async((0,), queue=first)  # its node's check passes
            with pytest.raises(BrokerError) as refused:
                await add.aapply_async((1,), queue=second, delay=60, task_id="ca-1")
            return refused.value
        finally:
            await app.aclose()
    try:
        error = asyncio.run(sends())
        assert not error.sent and not error.part_way and "+del" in str(error), str(error)
        with node.client() as client:
            assert not client.hexists(QueueKeys(name, second).messages, "ca-1")
    finally:
        _acl(node, "+del")
        app.close()
