"""On a real Redis Cluster: once the client reads the cluster's layout again (as
redis-py does after a failover or a moved slot), the next send looks up its node
again, so a node made primary since is asked before a send to it (issue 29, LOW;
tests/unit/test_acl_check_new_primary_asked.py plays the failover on a fake node map).
Nodes that passed are not asked again."""
from __future__ import annotations

from typing import Any, List

import pytest

from minitask import Minitask
from minitask.broker import acl_check
from tests.support.topologies import Cluster

pytestmark = [pytest.mark.scale, pytest.mark.timeout(300)]


def test_a_send_after_the_layout_is_read_again_looks_up_its_node(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "acllayout"
    queues = cluster.queues_on_distinct_shards(name, 3)
    app = Minitask(name, broker=cluster.url)
    add = app.task(name="add")(lambda a: a)
    transport = app.broker.transport
    try:
        for queue in queues:  # one send to each primary: each checked
            add.apply_async((0,), queue=queue)
        assert not transport.acl_unchecked
        transport.client.nodes_manager.initialize()  # (redis-py's, after a failover)
        assert transport.acl_unchecked
        looked_up: List[str] = []
        asked: List[Any] = []
        real_node_of, real_require = acl_check.node_of, acl_check.require_commands
        monkeypatch.setattr(acl_check, "node_of",
                            lambda owner, key: looked_up.append(key) or real_node_of(owner, key))
        monkeypatch.setattr(acl_check, "require_commands",
                            lambda *args: asked.append(args) or real_require(*args))
        add.apply_async((1,), queue=queues[0])
        assert looked_up and not asked  # its node passed already: not asked again
    finally:
        app.close()
